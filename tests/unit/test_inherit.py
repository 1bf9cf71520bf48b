"""Packages kept from a base interpreter: the parser, the closure, the checks, the .pth, drift."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wheels import make_wheel

from envmgr.drift import compare
from envmgr.errors import BackendError
from envmgr.inherit import (
    DISTRIBUTIONS_SCRIPT,
    closure,
    lock_lines,
    parse_interpreter,
    pin_problems,
    pth_text,
    read_interpreter,
    unmet_by_inherited,
)
from envmgr.lock import hash_local_wheels, inherited_line, locked_versions
from envmgr.spec import Spec

MARKERS = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64",
           "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "python_full_version": "3.12.3",
           "implementation_version": "3.12.3", "platform_release": "6.8", "platform_version": "#1"}
SITE = "/opt/torch/.venv/lib/python3.12/site-packages"


def base_json(dists: list[tuple[str, str, list[str]]], site: str = SITE, version: str = "3.12") -> str:
    return json.dumps({"executable": "/opt/torch/.venv/bin/python3", "version": version, "prefix": "/opt/torch/.venv",
                       "sites": [site], "markers": MARKERS,
                       "distributions": [{"name": n, "version": v, "requires": r, "site": site} for n, v, r in dists]})


TORCH = base_json([
    ("torch", "2.11.0+cu130", ["filelock", "nvidia-nccl-cu13==2.28.9; platform_system == 'Linux'",
                               "triton==3.6.0; platform_machine == 'x86_64'", "optree>=0.13; extra == 'optree'",
                               "pywin32; sys_platform == 'win32'", "not a requirement ((("]),
    ("filelock", "3.32.5", []),
    ("nvidia-nccl-cu13", "2.28.9", []),
    ("triton", "3.6.0", ["setuptools>=40.8"]),
    ("setuptools", "81.0.0", []),
    ("numpy", "2.5.2", []),
    ("Torch", "1.0", []),  # shadowed: the first on sys.path wins, as import does
])


def spec(packages: dict, inherit: list[str], version: str = "3.12") -> Spec:
    return Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "x"},
                                "hardware": {"gpu": {"arch": "sm_90"}},
                                "python": {"version": version, "packages": packages,
                                           "inherit": {"packages": inherit}}})


def test_the_closure_follows_requirements_that_apply_there_and_nothing_else():
    base = parse_interpreter(TORCH)
    assert base.distributions["torch"].version == "2.11.0+cu130"
    kept = closure(base, ["torch"])
    # extras, other platforms and unparsable lines are not followed; numpy is not torch's
    assert sorted(kept) == ["filelock", "nvidia-nccl-cu13", "setuptools", "torch", "triton"]


def test_a_pin_without_a_local_label_accepts_the_installed_cuda_build():
    base = parse_interpreter(TORCH)
    assert pin_problems(base, spec({"torch": "2.11.0"}, ["torch"])) == []
    assert pin_problems(base, spec({"torch": "2.11.0+cu130"}, ["torch"])) == []
    assert pin_problems(base, spec({"torch": "2.10.0"}, ["torch"])) == [
        "torch: /opt/torch/.venv/bin/python3 has 2.11.0+cu130, the spec pins ==2.10.0"]
    assert pin_problems(base, spec({"jax": "0.11.2"}, ["jax"])) == [
        "jax: not installed for /opt/torch/.venv/bin/python3 (the spec pins ==0.11.2)"]
    assert pin_problems(base, spec({"torch": "2.11.0"}, ["torch"], version="3.11"))[0].startswith(
        "the base interpreter /opt/torch/.venv/bin/python3 is Python 3.12, the spec wants 3.11")


def test_the_environments_own_packages_must_accept_the_inherited_versions():
    base = parse_interpreter(TORCH)
    kept = closure(base, ["torch"])
    venv_site = "/srv/gen/3/venv/lib/python3.12/site-packages"
    environment = parse_interpreter(json.dumps({
        "executable": "/srv/gen/3/venv/bin/python", "version": "3.12", "prefix": "/srv/gen/3/venv",
        "sites": [venv_site, SITE], "markers": MARKERS,
        "distributions": [
            {"name": "sglang", "version": "0.5.11", "requires": ["torch==2.11.0", "filelock>=3"], "site": venv_site},
            {"name": "old-thing", "version": "1.0", "requires": ["torch<2", "triton; python_version < '3'"],
             "site": venv_site},
            {"name": "torch", "version": "2.11.0+cu130", "requires": ["setuptools<1"], "site": SITE},
        ]}))
    assert unmet_by_inherited(environment, kept) == ["old-thing 1.0 needs torch<2, inherited 2.11.0+cu130"]


@pytest.mark.parametrize("text", ["", "[]", "{}", '{"executable": 1}', "x" * 10, '{"a": ' * 5000,
                                  base_json([("torch", "2", [1])])])
def test_a_damaged_package_list_is_a_clear_error(text):
    with pytest.raises(BackendError):
        parse_interpreter(text)


def test_the_pth_is_data_whatever_the_base_path_holds(tmp_path: Path):
    hostile = str(tmp_path / "a'\n__import__('os').system('touch PWNED')\n#")
    Path(hostile).mkdir(parents=True)
    (tmp_path / "venv").mkdir()
    pth = tmp_path / "venv" / "x.pth"
    pth.write_text(pth_text([hostile]))
    # site.addsitedir on the directory holding the .pth runs it exactly as a venv's site does
    done = subprocess.run([sys.executable, "-c", f"import site, sys; site.addsitedir({str(pth.parent)!r}); "
                           f"print({hostile!r} in sys.path)"], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout.strip() == "True" and not (tmp_path / "PWNED").exists(), done.stderr
    assert len(pth.read_text().splitlines()) == 2  # one comment, one line per directory


def test_this_interpreter_reads_as_a_base():
    base = read_interpreter(sys.executable)
    assert base.version == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "packaging" in base.distributions and base.sites
    assert all("lib-dynload" not in s for s in base.sites)  # the stdlib is not a site
    assert DISTRIBUTIONS_SCRIPT.count("import envmgr") == 0


def test_drift_counts_inherited_packages_and_not_what_the_base_shows_through():
    base = parse_interpreter(TORCH)
    kept = closure(base, ["torch"])
    lock = "\n".join(lock_lines(base, kept)) + "\nsix==1.16.0 \\\n    --hash=sha256:8abb\n"
    provided = {n: d.version for n, d in base.distributions.items()}
    installed = {**provided, "six": "1.16.0"}
    assert not compare(lock, installed, provided)
    # the base moved: its torch is not the one the generation was built against
    moved = compare(lock, {**installed, "torch": "2.12.0"}, {**provided, "torch": "2.12.0"})
    assert moved.changed == {"torch": ("2.11.0+cu130", "2.12.0")}
    # setuptools inherited from the base is checked like any inherited package
    assert compare(lock, {k: v for k, v in installed.items() if k != "setuptools"}, provided).missing == {
        "setuptools": "81.0.0"}
    # something installed into the environment beside the lock is still extra
    assert compare(lock, {**installed, "requests": "2.0"}, provided).extra == {"requests": "2.0"}


def test_local_wheels_get_the_hash_of_every_file_of_that_version(tmp_path: Path):
    wheels = tmp_path / "w"
    one = make_wheel(wheels, "demo", "1.0")
    make_wheel(wheels, "demo", "2.0")
    other = tmp_path / "elsewhere"
    make_wheel(other, "demo", "1.0")
    lock = (f"{inherited_line('torch', '2.11.0', '/b/python')}\ndemo==1.0\n    # from file://{wheels}\n"
            f"six==1.16.0 \\\n    --hash=sha256:8abb\n    # from https://pypi.org/simple\n")
    done = hash_local_wheels(lock, [str(wheels)])
    import hashlib

    want = hashlib.sha256(one.read_bytes()).hexdigest()
    assert f"demo==1.0 \\\n    --hash=sha256:{want}\n    # from file://{wheels}" in done
    assert done.count("--hash=") == 2 and done.startswith("# inherited: torch==2.11.0")
    assert locked_versions(done) == {"demo": "1.0", "six": "1.16.0"}
    # a directory that is not one of the spec's is never read
    assert "--hash" not in hash_local_wheels(f"demo==1.0\n    # from file://{other}\n", [str(wheels)])
