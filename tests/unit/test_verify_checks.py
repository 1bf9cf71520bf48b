"""verify: which checks a spec yields (pure), and evaluating them on testinfra's local host."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version as installed_version
from typing import Any

import pytest

from envmgr.cli import main
from envmgr.errors import BackendError, UsageError
from envmgr.spec.models import Spec
from envmgr.verify.checks import Check, checks_for, evaluate, package_matches
from envmgr.verify.run import split_hosts, verify

testinfra = pytest.importorskip("testinfra")

PYTHON_MM = f"{sys.version_info.major}.{sys.version_info.minor}"
PYDANTIC = installed_version("pydantic")


def make_spec(**overrides: Any) -> Spec:
    data: dict[str, Any] = {
        "apiVersion": "envmgr/v1",
        "metadata": {"name": "t"},
        "hardware": {"gpu": {"arch": "sm_90"}},
        "python": {"version": PYTHON_MM, "packages": {"torch": "2.9.1", "Flashinfer_Python": ">=0.5"}},
    }
    data.update(overrides)
    return Spec.model_validate(data)


def ids(checks: list[Check]) -> list[str]:
    return [c.id for c in checks]


def by_id(checks: list[Check], check_id: str) -> Check:
    return next(c for c in checks if c.id == check_id)


@pytest.fixture(scope="module")
def local():
    return testinfra.get_host("local://")


# --- checks_for -------------------------------------------------------------------------


def test_no_cuda_gives_python_packages_and_env_only():
    checks = checks_for(make_spec(env={"CUDA_HOME": "/x", "NCCL_DEBUG": "WARN"}), None, python="python3")
    assert ids(checks) == ["python:version", "package:flashinfer-python", "package:torch",
                           "env:CUDA_HOME", "env:NCCL_DEBUG"]


def test_apt_toolkit_checks_nvcc_and_the_cuda_link_of_the_selected_toolkit():
    spec = make_spec(cuda={"toolkits": [{"version": "12.8"}, {"version": "13.0.2"}], "select": "12.8"})
    checks = checks_for(spec, None, python="python3")
    assert by_id(checks, "nvcc:version").want == "12.8"
    link = by_id(checks, "cuda:link")
    assert (link.subject, link.want) == ("/usr/local/cuda", "/usr/local/cuda-12.8")


def test_selected_toolkit_release_drops_the_patch_and_honours_a_prefix():
    spec = make_spec(cuda={"toolkits": [{"version": "13.0.2", "source": "runfile", "prefix": "/opt/cuda-13"}]})
    checks = checks_for(spec, None, python="python3")
    assert by_id(checks, "nvcc:version").expected == "release 13.0"
    assert by_id(checks, "cuda:link").want == "/opt/cuda-13"


def test_pip_toolkit_checks_nvcc_but_not_the_link():
    spec = make_spec(cuda={"toolkits": [{"version": "13.0", "source": "pip"}]})
    checks = checks_for(spec, None, python="/venv/bin/python")
    assert "cuda:link" not in ids(checks)
    nvcc = by_id(checks, "nvcc:version")
    assert nvcc.pip_toolkit and nvcc.python == "/venv/bin/python"


def test_lock_adds_the_locked_version_to_each_package():
    lock = ("torch==2.9.1+cu128 \\\n    --hash=sha256:aa\n"
            "flashinfer-python==0.5.3 \\\n    --hash=sha256:bb\nsix==1.16.0\n")
    checks = checks_for(make_spec(), lock, python="python3")
    torch = by_id(checks, "package:torch")
    assert (torch.want, torch.locked, torch.expected) == ("==2.9.1", "2.9.1+cu128", "==2.9.1 (locked 2.9.1+cu128)")
    assert by_id(checks, "package:flashinfer-python").locked == "0.5.3"
    assert "package:six" not in ids(checks)  # the spec's packages, not every locked one


def test_without_lock_packages_check_the_specifier_only():
    torch = by_id(checks_for(make_spec(), None, python="python3"), "package:torch")
    assert (torch.locked, torch.expected) == (None, "==2.9.1")


def test_env_values_are_compared_as_text():
    env = by_id(checks_for(make_spec(env={"NCCL_P2P_LEVEL": 5}), None, python="python3"), "env:NCCL_P2P_LEVEL")
    assert env.want == "5"


@pytest.mark.parametrize(("installed", "specifier", "locked", "ok"), [
    ("2.9.1+cu128", "==2.9.1", None, True),  # a local CUDA tag satisfies the public pin
    ("2.9.1+cu128", "==2.9.1", "2.9.1+cu128", True),
    ("2.9.1+cu130", "==2.9.1", "2.9.1+cu128", False),  # the specifier allows it, the lock does not
    ("2.10.0", ">=2.9,<2.10", None, False),
    ("0.6.0rc1", ">=0.5", None, True),  # what is installed is installed, pre-release or not
    ("not-a-version", ">=0", None, False),
])
def test_package_matches(installed, specifier, locked, ok):
    assert package_matches(installed, specifier, locked) is ok


# --- evaluate on local:// ---------------------------------------------------------------


def local_checks(local, **overrides: Any) -> dict[str, Any]:
    spec = make_spec(**overrides)
    return {c.id: evaluate(c, local) for c in checks_for(spec, None, python=sys.executable)}


def test_python_version_of_this_interpreter_passes(local):
    result = local_checks(local)["python:version"]
    assert result.ok and result.found == PYTHON_MM and result.host == "local://"


def test_wrong_python_version_names_host_check_expected_and_found(local):
    other = "3.9" if PYTHON_MM != "3.9" else "3.10"
    result = local_checks(local, python={"version": other})["python:version"]
    assert not result.ok
    assert result.message == f"local://: python:version: expected {other}, found {PYTHON_MM}"


def test_installed_package_satisfying_the_specifier_passes(local):
    result = local_checks(local, python={"version": PYTHON_MM, "packages": {"Pydantic": ">=2"}})["package:pydantic"]
    assert result.ok and result.found == PYDANTIC


def test_package_outside_the_specifier_fails_with_the_message(local):
    result = local_checks(local, python={"version": PYTHON_MM, "packages": {"pydantic": "<2"}})["package:pydantic"]
    assert not result.ok
    assert result.message == f"local://: package:pydantic: expected <2, found {PYDANTIC}"


def test_package_not_equal_to_the_lock_fails_naming_the_lock(local):
    spec = make_spec(python={"version": PYTHON_MM, "packages": {"pydantic": ">=2"}})
    (check,) = [c for c in checks_for(spec, "pydantic==2.0.0\n", python=sys.executable) if c.kind == "package"]
    result = evaluate(check, local)
    assert not result.ok
    assert result.message == f"local://: package:pydantic: expected >=2 (locked 2.0.0), found {PYDANTIC}"


def test_missing_package_and_missing_interpreter(local):
    spec = make_spec(python={"version": PYTHON_MM, "packages": {"envmgr-no-such-package": "1.0"}})
    (check,) = [c for c in checks_for(spec, None, python=sys.executable) if c.kind == "package"]
    assert evaluate(check, local).found == "not installed"
    (check,) = [c for c in checks_for(spec, None, python="/nonexistent/python") if c.kind == "package"]
    result = evaluate(check, local)
    assert not result.ok and result.found.startswith("/nonexistent/python not runnable (exit 127")


def test_env_var_value_in_the_target_environment(local, monkeypatch):
    monkeypatch.setenv("ENVMGR_VERIFY_T", "a b")
    results = local_checks(local, env={"ENVMGR_VERIFY_T": "a b", "ENVMGR_VERIFY_UNSET": "1"})
    assert results["env:ENVMGR_VERIFY_T"].ok
    assert results["env:ENVMGR_VERIFY_UNSET"].message == "local://: env:ENVMGR_VERIFY_UNSET: expected '1', found unset"


def test_nvcc_and_link_fail_readably_without_a_toolkit(local, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))  # an empty CUDA_HOME and no nvcc on PATH
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    results = local_checks(local, cuda={"toolkits": [{"version": "13.0", "prefix": "/nonexistent/cuda-13.0"}]})
    assert results["nvcc:version"].found == "no nvcc (FLASHINFER_NVCC, CUDA_HOME/bin, CUDA_PATH/bin, PATH, /usr/local/cuda/bin)"
    assert not results["cuda:link"].ok


def test_nvcc_found_through_cuda_home(local, monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    results = local_checks(local, cuda={"toolkits": [{"version": "12.8"}, {"version": "13.0"}]})
    assert results["nvcc:version"].ok and str(fake) in results["nvcc:version"].found
    results = local_checks(local, cuda={"toolkits": [{"version": "12.8"}]})
    assert results["nvcc:version"].message.startswith(
        "local://: nvcc:version: expected release 12.8, found release 13.0 (V13.0.88")


def test_nvcc_check_asks_the_nvcc_flashinfers_jit_would_use(local, monkeypatch, tmp_path):
    """FLASHINFER_NVCC first, as the facts and the JIT have it (one search order, not three)."""
    for name, release in (("jit", "13.0"), ("home", "12.8")):
        nvcc = tmp_path / name / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True)
        nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
        nvcc.chmod(0o755)
    monkeypatch.setenv("FLASHINFER_NVCC", str(tmp_path / "jit" / "bin" / "nvcc"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    results = local_checks(local, cuda={"toolkits": [{"version": "13.0"}]})
    assert results["nvcc:version"].ok and str(tmp_path / "jit") in results["nvcc:version"].found


# --- verify / the command ---------------------------------------------------------------


def test_verify_local_and_json_command(tmp_path, capsys):
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "apiVersion: envmgr/v1\nmetadata: {name: t}\nhardware: {gpu: {arch: sm_90}}\n"
        f"python: {{version: '{PYTHON_MM}', packages: {{pydantic: '>=2', pyyaml: '<1'}}}}\n")
    rc = main(["verify", str(spec_file), "--hosts", "local://", "--python", sys.executable, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and not doc["ok"] and doc["failed"] == 1
    (failed,) = [r for r in doc["results"] if not r["ok"]]
    assert failed["check"] == "package:pyyaml" and failed["host"] == "local://"
    assert main(["verify", str(spec_file), "--hosts", "local://", "--python", sys.executable]) == 1
    assert "package:pyyaml: expected <1, found" in " ".join(capsys.readouterr().out.split())


def test_hosts_are_urls_and_split_on_commas():
    assert split_hosts(["docker://a,docker://b", " local:// "]) == ["docker://a", "docker://b", "local://"]
    with pytest.raises(UsageError):
        split_hosts([])
    with pytest.raises(UsageError, match="not a URL"):
        verify(make_spec(), ["gpu01"])


def test_unknown_scheme_is_a_backend_error_naming_the_host():
    with pytest.raises(BackendError, match="nosuch://x"):
        verify(make_spec(), ["nosuch://x"])


# --- the pytest plugin ------------------------------------------------------------------


@pytest.mark.slow
def test_pytest_plugin_one_test_per_check_failing_with_the_message(tmp_path):
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "apiVersion: envmgr/v1\nmetadata: {name: t}\nhardware: {gpu: {arch: sm_90}}\n"
        f"python: {{version: '{PYTHON_MM}', packages: {{pydantic: '>=2', pyyaml: '<1'}}}}\n")
    argv = [sys.executable, "-m", "pytest", "-p", "envmgr.verify.plugin", "-p", "no:cacheprovider",
            "--envmgr-spec", str(spec_file), "--envmgr-python", sys.executable, "--hosts", "local://", "-v"]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "test_envmgr_check[local-package:pydantic] PASSED" in out.stdout
    assert "local://: package:pyyaml: expected <1, found" in out.stdout
    assert "1 failed, 2 passed" in out.stdout


def test_pytest_plugin_reports_a_bad_spec_as_a_usage_error(tmp_path):
    argv = [sys.executable, "-m", "pytest", "-p", "envmgr.verify.plugin", "-p", "no:cacheprovider",
            "--envmgr-spec", str(tmp_path / "missing.yaml")]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 4 and "--envmgr-spec" in out.stderr, out.stdout + out.stderr
