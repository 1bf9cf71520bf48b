"""pytest plugin: a spec's checks as tests, one per (host, check), on testinfra's ``host``.

    pytest -p envmgr.verify.plugin --envmgr-spec specs/cuda13.yaml \\
        --hosts docker://c1,ssh://gpu01 [--envmgr-lock lock.txt] \\
        [--envmgr-python /opt/envmgr/venv/bin/python]

``--hosts`` (and ``--connection``, ``--ssh-config``, ``--ansible-inventory`` ...) are
testinfra's own options: its plugin parametrizes the ``host`` fixture, this one the check.
A failing test's message names the host, the check, what was expected and what was found.

With ``--envmgr-spec`` the plugin adds its own test function (``test_envmgr_check`` in
this file) to what pytest collects: alone when no paths are given, beside the user's
tests otherwise. The parametrizing hook lives on an object registered at configure time,
not in this module, so pytest collecting this file as a test module does not run it twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from envmgr.errors import EnvmgrError
from envmgr.verify.checks import Check, checks_for, evaluate, host_label

if TYPE_CHECKING:
    from testinfra.host import Host

PLUGIN_NAME = "envmgr-verify-checks"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("envmgr", "envmgr verify (checks generated from a spec)")
    group.addoption("--envmgr-spec", dest="envmgr_spec", metavar="SPEC",
                    help="Spec file whose checks to run on every --hosts host")
    group.addoption("--envmgr-lock", dest="envmgr_lock", metavar="LOCK",
                    help="Lock file: packages must also equal their locked versions")
    group.addoption("--envmgr-python", dest="envmgr_python", metavar="PYTHON", default="python3",
                    help="Interpreter of the environment, e.g. /opt/envmgr/venv/bin/python "
                         "(default: python3)")


def pytest_configure(config: pytest.Config) -> None:
    spec_path = config.getoption("envmgr_spec")
    if not spec_path:
        return
    checks = load_checks(spec_path, config.getoption("envmgr_lock"), config.getoption("envmgr_python"))
    config.pluginmanager.register(SpecChecks(checks), PLUGIN_NAME)
    collect_this_file(config)


def load_checks(spec_path: str, lock_path: str | None, python: str) -> list[Check]:
    from envmgr.spec import load_spec
    from envmgr.verify.run import read_lock

    try:
        spec = load_spec(spec_path).spec
        lock = read_lock(lock_path) if lock_path else None
    except EnvmgrError as exc:
        raise pytest.UsageError(f"--envmgr-spec/--envmgr-lock: {exc.message}") from exc
    return checks_for(spec, lock, python=python)


def collect_this_file(config: pytest.Config) -> None:
    # An explicit path is collected whatever python_files says; without user paths the
    # default (testpaths or the current directory) would only find unrelated tests.
    this_file = str(Path(__file__).resolve())
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(this_file)
    else:
        config.args[:] = [this_file]


class SpecChecks:
    """Parametrizes ``envmgr_check`` with the spec's checks, ids = check ids."""

    def __init__(self, checks: list[Check]) -> None:
        self.checks = checks

    @pytest.hookimpl(trylast=True)  # after testinfra's: test ids read [host-check]
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "envmgr_check" in metafunc.fixturenames:
            metafunc.parametrize("envmgr_check", self.checks, ids=[c.id for c in self.checks])


@pytest.fixture(scope="module")
def envmgr_host(host: Host) -> Host:
    """testinfra's host, shown able to run a command: a dead host is one clear error per
    test, not a page of 'python not runnable' failures."""
    from envmgr.verify.run import ensure_reachable

    problem = None
    try:
        ensure_reachable(host_label(host), host)
    except EnvmgrError as exc:
        problem = exc.message
    if problem:  # failed outside the except block: no "during handling..." chain in the report
        pytest.fail(problem, pytrace=False)
    return host


def test_envmgr_check(envmgr_host: Host, envmgr_check: Check) -> None:
    try:
        message = evaluate(envmgr_check, envmgr_host).failure
    except EnvmgrError as exc:  # the transport broke mid-run: say so, without a traceback
        message = exc.message
    if message:
        pytest.fail(message, pytrace=False)
