"""What a realized environment must show, as checks generated from its spec, and how one
check is evaluated on a host through testinfra's ``host`` API.

``checks_for`` is pure: spec (+ lock) in, a list of ``Check`` out. ``evaluate`` runs the
few commands one check needs on one testinfra host and returns a ``CheckResult``; it
imports nothing from testinfra (the caller hands it a host), so this module stays cheap
to import. Values from the spec never become shell text: testinfra quotes every argument
(``host.run("%s -V", python)``) and the scripts below are constants taking positional
arguments.

Check ids (stable; the pytest plugin uses them as test ids):

    python:version      major.minor of ``PYTHON -V`` equals ``python.version``
    package:NAME        installed version satisfies the spec's specifier (and equals the lock)
    inherited:NAME      a ``python.inherit`` package comes from the base interpreter's site-packages,
                        not the environment's own (nothing shadows it)
    nvcc:version        the nvcc FlashInfer's JIT would use (FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH,
                        PATH, /usr/local/cuda; else the wheel for pip toolkits) is release X.Y
    env:NAME            the variable has the spec's value in the target's environment
    cuda:link           /usr/local/cuda resolves to the selected toolkit (not for pip toolkits)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envmgr.errors import BackendError, FactsError
from envmgr.spec.models import Spec, canonical_name

if TYPE_CHECKING:  # testinfra is imported only by the code that connects (run.py, plugin.py)
    from testinfra.host import Host

CheckKind = Literal["python", "package", "inherited", "nvcc", "env", "cuda-link"]

CUDA_LINK = "/usr/local/cuda"
TAIL_CHARS = 200  # how much of a failing command's stderr a message quotes

# $1 = package name, canonical (PEP 503). Prints the installed version, nothing if absent.
# importlib.metadata, not pip: venvs made by uv have no pip.
PACKAGE_VERSION_SCRIPT = r"""
import sys
sys.path[:] = [p for p in sys.path if p]  # never import from the working directory
import importlib.metadata as metadata, re
wanted = sys.argv[1]
for dist in metadata.distributions():
    name = dist.metadata["Name"] or ""
    if re.sub(r"[-_.]+", "-", name).lower() == wanted:
        print(dist.version)
        break
"""

# $1 = package name, canonical. Prints "LOCATION<TAB>PREFIX": where the first distribution of
# that name on sys.path lives and the interpreter's own prefix; nothing if absent.
PACKAGE_LOCATION_SCRIPT = r"""
import sys
sys.path[:] = [p for p in sys.path if p]
import importlib.metadata as metadata, os, re
wanted = sys.argv[1]
for dist in metadata.distributions():
    if re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower() == wanted:
        print(os.path.realpath(str(dist.locate_file(""))) + "\t" + os.path.realpath(sys.prefix))
        break
"""

# Run by the target's interpreter: the nvcc of an nvidia-cuda-nvcc wheel
# (nvidia/cuda_nvcc/bin/nvcc for CUDA 12, nvidia/cu13/bin/nvcc for CUDA 13).
PIP_NVCC_SCRIPT = r"""
import sys
sys.path[:] = [p for p in sys.path if p]
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for root in nvidia.__path__:
    for path in sorted(glob.glob(os.path.join(root, "*", "bin", "nvcc"))):
        print(path)
        raise SystemExit(0)
"""


@dataclass(frozen=True)
class Check:
    """One thing a host must show. ``want`` is what ``evaluate`` compares; ``expected``
    says the same for people (``==1.16.0 (locked 1.16.0)``)."""

    id: str
    kind: CheckKind
    title: str
    expected: str
    subject: str  # the package, variable, interpreter or path the check looks at
    want: str  # specifier, major.minor, value, link target or toolkit release
    locked: str | None = None  # package checks given a lock: the exact locked version
    python: str = "python3"  # the interpreter python/package/nvcc checks ask
    pip_toolkit: bool = False  # nvcc check: the toolkit comes from nvidia-* wheels


@dataclass(frozen=True)
class CheckResult:
    """What one check found on one host; ``message`` is one line naming all of it."""

    host: str
    check: str
    ok: bool
    expected: str
    found: str
    message: str

    @property
    def failure(self) -> str | None:
        """The message when the check failed, else None."""
        return None if self.ok else self.message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- generating checks (pure) -----------------------------------------------------------


def checks_for(spec: Spec, lock: str | None, *, python: str = "python3") -> list[Check]:
    """The checks a host realized from ``spec`` must pass, in a stable order."""
    checks = [python_check(spec, python)]
    checks += package_checks(spec, lock, python)
    checks += cuda_checks(spec, python)
    checks += env_checks(spec)
    return checks


def python_check(spec: Spec, python: str) -> Check:
    version = spec.python.version
    return Check(id="python:version", kind="python", title=f"{python} is Python {version}",
                 expected=version, subject=python, want=version, python=python)


def package_checks(spec: Spec, lock: str | None, python: str) -> list[Check]:
    locked = _locked_versions(lock) if lock is not None else {}
    checks = []
    for package, specifier in sorted(spec.python.packages.items(), key=lambda kv: canonical_name(kv[0])):
        name = canonical_name(package)
        pin = locked.get(name)
        expected = specifier + (f" (locked {pin})" if pin else "")
        checks.append(Check(id=f"package:{name}", kind="package",
                            title=f"{name} {expected} installed for {python}",
                            expected=expected, subject=name, want=specifier, locked=pin,
                            python=python))
    for name in sorted(spec.python.inherited):
        checks.append(Check(id=f"inherited:{name}", kind="inherited",
                            title=f"{name} comes from the base interpreter, not {python}'s own site",
                            expected="outside the environment", subject=name, want="", python=python))
    return checks


def cuda_checks(spec: Spec, python: str) -> list[Check]:
    if spec.cuda is None:
        return []
    toolkit = spec.cuda.selected
    release = _release(toolkit.version)
    pip = toolkit.source == "pip"
    checks = [Check(id="nvcc:version", kind="nvcc", title=f"nvcc is CUDA {release}",
                    expected=f"release {release}", subject="nvcc", want=release,
                    python=python, pip_toolkit=pip)]
    if not pip:  # wheels carry their own toolkit; nothing links /usr/local/cuda to them
        target = toolkit.prefix or f"/usr/local/cuda-{release}"
        checks.append(Check(id="cuda:link", kind="cuda-link",
                            title=f"{CUDA_LINK} points to {target}",
                            expected=f"-> {target}", subject=CUDA_LINK, want=target))
    return checks


def env_checks(spec: Spec) -> list[Check]:
    """One check per env var, secrets left out: an image never holds them, and a check
    would print the value it expects."""
    from envmgr.secrets import holding_secrets

    secret = holding_secrets(spec)  # a check's title and its expected value are printed
    checks = []
    for name, value in sorted(spec.env.items()):
        if name in secret:
            continue
        text = str(value)  # as the planner and the image builder write it
        checks.append(Check(id=f"env:{name}", kind="env", title=f"{name}={text}",
                            expected=repr(text), subject=name, want=text))
    return checks


def _locked_versions(lock: str) -> dict[str, str]:
    from envmgr.lock import locked_versions  # lock.py pulls in the process runner

    return locked_versions(lock)


def _release(version: str) -> str:
    return ".".join(version.split(".")[:2])


# --- evaluating one check on one host ---------------------------------------------------


def transport_errors() -> tuple[type[BaseException], ...]:
    """What testinfra's transports raise for a host they cannot use or reach, translated to
    ``BackendError`` where they are called: RuntimeError (an unknown backend, a connection or
    inventory failure), OSError (sockets, a missing client binary), ValueError (a URL it cannot
    parse), LookupError (a host the inventory lacks), ImportError (a client library missing),
    and paramiko's SSHException where paramiko is installed."""
    errors: list[type[BaseException]] = [RuntimeError, OSError, ValueError, LookupError, ImportError]
    try:
        from paramiko import SSHException
    except ImportError:
        pass
    else:
        errors.append(SSHException)
    return tuple(errors)


def evaluate(check: Check, host: Host, *, label: str | None = None) -> CheckResult:
    """Run ``check`` on a testinfra ``host``. A host that cannot run commands at all is a
    ``BackendError``; anything the host runs but gets wrong is a failed result."""
    label = label or host_label(host)
    observe = _OBSERVERS[check.kind]
    try:
        ok, found = observe(check, host)
    except BackendError:
        raise
    except transport_errors() as exc:  # a check's command could not run on the host
        raise BackendError(f"{label}: {check.id}: could not run the check: {exc}",
                           hint="is the host reachable with this URL?") from exc
    return CheckResult(host=label, check=check.id, ok=ok, expected=check.expected,
                       found=found, message=result_message(label, check, ok, found))


def result_message(label: str, check: Check, ok: bool, found: str) -> str:
    if ok:
        return f"{label}: {check.id}: ok ({found})"
    return f"{label}: {check.id}: expected {check.expected}, found {found}"


def host_label(host: Host) -> str:
    """testinfra's own name for the host: ``docker://c1``, ``ssh://gpu01``, ``local://``."""
    label = str(host.backend.get_pytest_id())
    return label if "://" in label else f"{label}://"  # the URL it was reached by ("local" is local://)


Observation = tuple[bool, str]  # (ok, what was found, for people)


def observe_python(check: Check, host: Host) -> Observation:
    out = host.run("%s -V", check.python)
    if out.rc != 0:
        return False, f"{check.python} not runnable ({_tail(out)})"
    text = (out.stdout + out.stderr).strip()  # interpreters before 3.4 print -V on stderr
    match = re.search(r"Python (\d+\.\d+)", text)
    if not match:
        return False, f"unrecognised `{check.python} -V` output {text[:80]!r}"
    return match.group(1) == check.want, match.group(1)


def observe_package(check: Check, host: Host) -> Observation:
    out = host.run("%s -c %s %s", check.python, PACKAGE_VERSION_SCRIPT, check.subject)
    if out.rc != 0:
        return False, f"{check.python} not runnable ({_tail(out)})"
    installed = out.stdout.strip()
    if not installed:
        return False, "not installed"
    return package_matches(installed, check.want, check.locked), installed


def observe_inherited(check: Check, host: Host) -> Observation:
    out = host.run("%s -c %s %s", check.python, PACKAGE_LOCATION_SCRIPT, check.subject)
    if out.rc != 0:
        return False, f"{check.python} not runnable ({_tail(out)})"
    location, _, prefix = out.stdout.strip().partition("\t")
    if not location:
        return False, "not installed"
    inside = location == prefix or location.startswith(prefix.rstrip("/") + "/")
    return not inside, f"{'shadowed by the environment' if inside else 'from'} {location}"


def package_matches(installed: str, specifier: str, locked: str | None) -> bool:
    """The specifier allows ``installed`` (pre-releases included: it is what is there),
    and it is exactly the locked version when there is a lock."""
    try:
        version = Version(installed)
    except InvalidVersion:
        return False
    if not SpecifierSet(specifier).contains(version, prereleases=True):
        return False
    return locked is None or version == Version(locked)


def observe_nvcc(check: Check, host: Host) -> Observation:
    from envmgr.facts.collect import COMPILER_SEARCH_SCRIPT, CUDA_ROOT, first_jit_nvcc

    # the nvcc FlashInfer's JIT would use: the facts' own search, in their order
    nvcc = first_jit_nvcc(host.run("sh -c %s sh %s", COMPILER_SEARCH_SCRIPT, CUDA_ROOT).stdout) or ""
    if not nvcc and check.pip_toolkit:
        nvcc = host.run("%s -c %s", check.python, PIP_NVCC_SCRIPT).stdout.strip()
    if not nvcc:
        where = ("FLASHINFER_NVCC, CUDA_HOME/bin, CUDA_PATH/bin, PATH, /usr/local/cuda/bin"
                 + (f" or {check.python}'s nvidia wheels" if check.pip_toolkit else ""))
        return False, f"no nvcc ({where})"
    out = host.run("%s --version", nvcc)
    if out.rc != 0:
        return False, f"{nvcc} --version failed ({_tail(out)})"
    from envmgr.facts.parsers import parse_nvcc_version

    try:
        version, release = parse_nvcc_version(out.stdout)
    except FactsError as exc:
        return False, f"{nvcc}: {exc.message}"
    return release == check.want, f"release {release} (V{version}, {nvcc})"


def observe_env(check: Check, host: Host) -> Observation:
    out = host.run("printenv %s", check.subject)
    if out.rc != 0:
        return False, "unset"
    value = out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout
    return value == check.want, repr(value)


def observe_cuda_link(check: Check, host: Host) -> Observation:
    link = host.file(check.subject)
    if not link.is_symlink:
        return False, f"{check.subject} is not a symlink" if link.exists else f"no {check.subject}"
    target = link.linked_to  # fully resolved (readlink -f): /etc/alternatives hops vanish
    wanted = host.file(check.want)
    resolved_want = wanted.linked_to if wanted.is_symlink else check.want
    return target in (check.want, resolved_want), f"-> {target}"


def _tail(out: Any) -> str:
    text = (out.stderr or out.stdout or "").strip()
    return f"exit {out.rc}: {text[-TAIL_CHARS:]}" if text else f"exit {out.rc}"


_OBSERVERS: dict[str, Callable[[Check, Host], Observation]] = {
    "python": observe_python,
    "package": observe_package,
    "inherited": observe_inherited,
    "nvcc": observe_nvcc,
    "env": observe_env,
    "cuda-link": observe_cuda_link,
}
