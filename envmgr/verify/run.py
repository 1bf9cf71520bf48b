"""``envmgr verify``: connect to hosts by testinfra URL and evaluate a spec's checks on each.

Host URLs are testinfra's own (``local://``, ``docker://NAME``, ``ssh://user@host``,
``ansible://GROUP?inventory=FILE`` (or testinfra's ``?ansible_inventory=``), ...) and go to
``testinfra.get_hosts``, so a group expands to its hosts exactly as ``pytest --hosts`` does.
testinfra is imported here only when connecting: the CLI stays fast to start.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

from envmgr.errors import BackendError, UsageError
from envmgr.spec.models import Spec
from envmgr.verify.checks import Check, CheckResult, checks_for, evaluate, host_label, transport_errors

if TYPE_CHECKING:
    from rich.console import Console
    from testinfra.host import Host

REACHABLE_SENTINEL = "envmgr-verify-reachable"
TESTINFRA_ANSIBLE = "ansible://"  # testinfra's ansible backend: its inventory is ?ansible_inventory=
MAX_PARALLEL_HOSTS = 8


def verify(spec: Spec, hosts: list[str], *, lock: str | None = None,
           python: str = "python3") -> list[CheckResult]:
    """Every check of ``spec`` on every host, hosts in the given order, checks in spec order.
    Raises ``BackendError`` naming the host when one cannot be reached at all."""
    checks = checks_for(spec, lock, python=python)
    connected = connect(hosts)
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_HOSTS, len(connected)) or 1) as pool:
        per_host = list(pool.map(lambda labelled: evaluate_all(checks, *labelled), connected))
    return [result for results in per_host for result in results]


def evaluate_all(checks: list[Check], label: str, host: Host) -> list[CheckResult]:
    return [evaluate(check, host, label=label) for check in checks]


def connect(urls: list[str]) -> list[tuple[str, Host]]:
    """(label, host) for each host the URLs name, each shown able to run a command."""
    connected = []
    for url in urls:
        for host in hosts_of(url):
            label = host_label(host)
            ensure_reachable(label, host)
            connected.append((label, host))
    return connected


def for_testinfra(url: str) -> str:
    """envmgr names an inventory ``?inventory=`` everywhere; testinfra ``?ansible_inventory=``:
    an ``ansible://`` host takes either, and goes to testinfra in its spelling."""
    if not url.startswith(TESTINFRA_ANSIBLE):  # testinfra's scheme (its backend), not envmgr's
        return url
    group, _, query = url.removeprefix(TESTINFRA_ANSIBLE).partition("?")
    if not query:
        return url
    params = parse_qsl(query, keep_blank_values=True)
    names = [name for name, _ in params]
    if "inventory" in names and "ansible_inventory" in names:
        raise UsageError(f"{url}: give ?inventory= or ?ansible_inventory=, not both", hint="they are one setting")
    return f"{TESTINFRA_ANSIBLE}{group}?" + urlencode([("ansible_inventory" if n == "inventory" else n, v) for n, v in params])


def hosts_of(url: str) -> list[Host]:
    if "://" not in url:  # testinfra would silently pick paramiko (ssh) for a bare name
        raise UsageError(f"host {url!r} is not a URL",
                         hint="write local://, docker://NAME, ssh://user@host or ansible://GROUP?inventory=FILE")
    import testinfra

    try:
        hosts = testinfra.get_hosts([for_testinfra(url)])
    except transport_errors() as exc:  # unknown scheme, bad inventory, missing client library...
        raise BackendError(f"{url}: testinfra cannot use this host: {exc}",
                           hint="check the URL and that its client (docker, ssh, ansible) is installed") from exc
    if not hosts:
        raise BackendError(f"{url}: names no hosts", hint="check the group and the inventory")
    return hosts


def ensure_reachable(label: str, host: Host) -> None:
    """Some transports (docker exec, ssh) report a dead host as a failed command, not an
    exception: run one echo so that such a host is an error, not a page of failed checks."""
    try:
        out = host.run("echo %s", REACHABLE_SENTINEL)
    except transport_errors() as exc:
        raise BackendError(f"{label}: cannot run commands: {exc}",
                           hint="is the host up and reachable with this URL?") from exc
    if out.rc != 0 or REACHABLE_SENTINEL not in out.stdout:
        detail = (out.stderr or out.stdout).strip()[-300:]
        raise BackendError(f"{label}: cannot run commands (exit {out.rc}): {detail}",
                           hint="is the host up and reachable with this URL?")


# --- the command ------------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """What ``envmgr verify`` checked: the spec (as given), the host URLs, every result."""

    spec_path: str
    spec: Spec
    hosts: list[str]
    results: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


def verify_hosts(spec_path: Path | str, hosts: list[str], lock_path: Path | str | None, python: str) -> Verified:
    """``envmgr verify SPEC --hosts ...``: the spec's checks on every host."""
    from envmgr.spec import load_spec

    loaded = load_spec(spec_path)
    urls = split_hosts(hosts)
    lock = read_lock(lock_path) if lock_path is not None else None
    return Verified(str(spec_path), loaded.spec, urls, verify(loaded.spec, urls, lock=lock, python=python))


def verify_generation(generation, spec_path: Path | str | None) -> Verified:
    """The current generation's environment against its own spec (or SPEC) and lock, reached
    the way its target offers (a venv: here, with its interpreter and env; an image: a
    throwaway container of it, started and removed here); a fleet is verified with --hosts."""
    from envmgr.backends import recorded_target

    kind = generation.meta.get("backend_kind")
    target = recorded_target(kind)
    if target is None or not generation.location:
        raise UsageError(f"generation {generation.number} records no environment envmgr can reach ({kind!r})",
                         hint="envmgr verify SPEC --hosts URL")
    with target.at(generation.location) as environment, environment.testinfra_url() as url:
        return verify_hosts(spec_path or generation.path / "spec.yaml", [url],
                            generation.path / "lock.txt", environment.interpreter)


def split_hosts(hosts: list[str]) -> list[str]:
    """``--hosts a,b --hosts c`` -> [a, b, c], like testinfra's comma-separated ``--hosts``."""
    urls = [url.strip() for value in hosts for url in value.split(",") if url.strip()]
    if not urls:
        raise UsageError("no hosts to verify", hint="give --hosts, e.g. --hosts docker://NAME")
    return urls


MAX_LOCK_BYTES = 16 << 20  # a lock of 500 packages with every hash is under a MiB


def read_lock(path: Path | str) -> str:
    """A lock file's text: bounded, a FIFO with no writer never hangs, bytes that are not
    UTF-8 are a clear error."""
    from envmgr.spec.source import read_at_most

    try:
        data = read_at_most(Path(path), MAX_LOCK_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read lock file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_LOCK_BYTES:
        raise UsageError(f"lock file {path} is over {MAX_LOCK_BYTES} bytes: is it the right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"lock file {path} is not UTF-8 text",
                         hint="a lock is the requirements text `uv pip compile` writes") from None


def results_document(spec_path: str, spec: Spec, hosts: list[str],
                     results: list[CheckResult]) -> dict:
    return {"spec": spec_path, "name": spec.metadata.name, "hosts": hosts,
            "ok": all(r.ok for r in results), "failed": sum(not r.ok for r in results),
            "results": [r.to_dict() for r in results]}


def render(name: str, results: list[CheckResult], console: Console | None = None) -> None:
    """One table row per (host, check), then every failure's message in full, one line each."""
    from rich.table import Table
    from rich.text import Text

    from envmgr.report.tables import rich_console

    console = console or rich_console()  # no emoji there: 'cuda:link:' is text
    table = Table(title=f"verify {name}", title_justify="left")
    for column in ("host", "check", "", "expected", "found"):
        table.add_column(column, overflow="fold")
    for r in results:  # Text cells: a found value like 'x[y]' is not rich markup
        status = Text("PASS", style="green") if r.ok else Text("FAIL", style="bold red")
        table.add_row(Text(r.host), Text(r.check), status, Text(r.expected), Text(r.found))
    console.print(table)
    failed = [r for r in results if not r.ok]
    hosts = len({r.host for r in results})
    console.print(f"{len(results)} checks on {hosts} host(s): "
                  f"{len(results) - len(failed)} passed, {len(failed)} failed", markup=False)
    for r in failed:
        console.print(Text(r.message, style="red"), soft_wrap=True)
