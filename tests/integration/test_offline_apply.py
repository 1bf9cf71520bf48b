"""An offline apply, for real: a venv built from a local wheel directory with no index at all,
keeping a package of a base interpreter instead of installing it (issue 27's CPU part).

The wheel directory holds real PyPI wheels (six, idna; fetched once, ``tests/wheels.py``) and
two small wheels written here that depend on them. The base interpreter is a venv of its own
with idna installed, as ``/opt/torch/.venv`` holds torch on the GPU image. Every command is
the CLI in a subprocess, with the indexes pointed at a closed port: a step that reached for
the network would fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wheels import make_wheel, pypi_wheels

from envmgr.lock import inherited_versions, lock_sources, locked_versions, uv_binary
from envmgr.state import Store

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
NO_NETWORK = {"UV_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
              "UV_NO_CACHE": "1"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("offline") / "wheels"
    pypi_wheels(directory)  # six 1.16.0, idna 3.7
    make_wheel(directory, "envmgr-demo-app", "1.0", ("six>=1.16", "idna>=3"), module="envmgr_demo_app")
    make_wheel(directory, "envmgr-demo-old", "2.0", ("idna<3",), module="envmgr_demo_old")
    return directory


@pytest.fixture(scope="module")
def base(wheels: Path, tmp_path_factory) -> Path:
    """A base interpreter that has idna 3.7: a venv, as the GPU image's /opt/torch/.venv is."""
    root = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(root)], check=True)
    subprocess.run([uv_binary(), "pip", "install", "--quiet", "--python", str(root / "bin" / "python"),
                    "--offline", "--no-index", "--find-links", str(wheels), "idna==3.7"],
                   check=True, env={**os.environ, **NO_NETWORK})
    return root / "bin" / "python"


def write_spec(path: Path, base: Path, packages: dict[str, str], inherit: tuple[str, ...] = ("idna",),
               no_deps: bool = False) -> Path:
    path.write_text(textwrap.dedent(f"""\
        apiVersion: envmgr/v1
        metadata: {{name: offline-demo}}
        hardware: {{gpu: {{arch: sm_90}}}}
        python:
          version: "{PY}"
          packages: {json.dumps(packages)}
          sources:
            find_links: [wheels]        # relative to this file
            offline: true
          inherit:
            python: {base}
            packages: {json.dumps(list(inherit))}
          no_deps: {json.dumps(no_deps)}
        env: {{DEMO: "1"}}
        """))
    return path


def envmgr(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envmgr", *args], capture_output=True, text=True,
                          env={**os.environ, **NO_NETWORK, "ENVMGR_HOME": str(home)}, check=False, timeout=300)


def base_distributions(base: Path) -> list[str]:
    out = subprocess.run([str(base), "-c", "import importlib.metadata as m; "
                          "print(sorted(d.metadata['Name'] + ' ' + d.version for d in m.distributions()))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture
def project(tmp_path: Path, wheels: Path) -> Path:
    (tmp_path / "wheels").symlink_to(wheels)
    return tmp_path


def test_offline_apply_installs_from_the_directory_and_keeps_the_inherited_package(project, base):
    before = base_distributions(base)
    spec = write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "idna": "3.7"})
    home = project / "state"

    plan = envmgr(home, "plan", str(spec), "--json")
    assert plan.returncode == 2, plan.stderr
    actions = {a["target"]: a["kind"] for a in json.loads(plan.stdout)["actions"]}
    assert actions["idna"] == "package.inherit" and actions["envmgr-demo-app"] == "package.install"
    resolve = json.loads(plan.stdout)["steps"][0]["summary"]
    assert f"find-links {project / 'wheels'} (offline)" in resolve and f"inherited from {base}: idna ==3.7" in resolve

    applied = envmgr(home, "apply", str(spec), "--yes")
    assert applied.returncode == 0, applied.stderr
    gen = Store(home).current()
    assert gen is not None and gen.number == 1
    # the lock: what was installed and from where; the inherited package recorded, not locked
    assert locked_versions(gen.lock) == {"envmgr-demo-app": "1.0", "six": "1.16.0"}
    assert inherited_versions(gen.lock) == {"idna": "3.7"}
    sources = lock_sources(gen.lock)
    assert sources["six"] == sources["envmgr-demo-app"] == f"file://{project / 'wheels'}"
    assert sources["idna"] == f"inherited from {base}"
    assert gen.lock.count("--hash=sha256:") == 2

    # inside: the venv's own packages, the base's idna (never copied into the venv)
    ran = envmgr(home, "run", "--", "python", "-c",
                 "import envmgr_demo_app, idna, six, importlib.metadata as m; "
                 "print(envmgr_demo_app.__file__); print(idna.__file__); print(m.version('idna'))")
    assert ran.returncode == 0, ran.stderr
    app_file, idna_file, idna_version = ran.stdout.split()
    assert app_file.startswith(str(gen.path / "venv")) and idna_version == "3.7"
    assert not idna_file.startswith(str(gen.path)) and idna_file.startswith(str(base.parent.parent))

    status = envmgr(home, "status")
    assert status.returncode == 0 and "no drift" in status.stdout, status.stdout + status.stderr
    verify = envmgr(home, "verify", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    checks = {r["check"]: r for r in json.loads(verify.stdout)["results"]}
    assert checks["inherited:idna"]["ok"] and "from " + str(base.parent.parent) in checks["inherited:idna"]["found"]
    assert checks["package:envmgr-demo-app"]["ok"]

    again = envmgr(home, "plan", str(spec))
    assert again.returncode == 0 and "no changes" in again.stdout
    assert base_distributions(base) == before  # the base was read, never written


def test_the_pip_installer_installs_offline_with_the_bases_pip(project):
    """venv://?installer=pip: pip of the base (the test's interpreter, which has one) installs
    into a venv made without pip, so no ensurepip copy shadows what is inherited."""
    base = Path(sys.executable)
    import importlib.metadata

    pinned = importlib.metadata.version("packaging")
    spec = write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "idna": "3.7", "packaging": pinned},
                      inherit=("packaging",))
    home = project / "state"
    applied = envmgr(home, "apply", str(spec), "--yes", "--backend", "venv://?installer=pip")
    assert applied.returncode == 0, applied.stderr
    gen = Store(home).current()
    assert gen.meta["details"]["installer"] == "pip"
    own = sorted(p.name.split("-")[0] for p in (gen.path / "venv").glob("lib/python*/site-packages/*.dist-info"))
    assert own == ["envmgr_demo_app", "idna", "six"]  # no pip, no setuptools of its own
    status = envmgr(home, "status")
    assert status.returncode == 0, status.stdout + status.stderr


def test_a_missing_wheel_is_a_clear_error_and_makes_no_generation(project, base):
    spec = write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "six": "1.17.0", "idna": "3.7"})
    home = project / "state"
    failed = envmgr(home, "apply", str(spec), "--yes")
    assert failed.returncode == 1
    assert "resolving the packages failed" in failed.stderr and "six" in failed.stderr
    assert f"in {project / 'wheels'}; add the missing wheel there" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert Store(home).current() is None


def test_a_wrong_inherited_version_is_refused_before_anything_is_built(project, base):
    spec = write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "idna": "3.6"})
    home = project / "state"
    failed = envmgr(home, "apply", str(spec), "--yes")
    assert failed.returncode == 1
    assert f"idna: {base} has 3.7, the spec pins ==3.6" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert not list((home / "generations").glob("[0-9]*"))  # refused before a generation was begun


def test_a_package_that_needs_another_inherited_version_fails_the_build_not_the_current(project, base):
    home = project / "state"
    good = envmgr(home, "apply", str(write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "idna": "3.7"})),
                  "--yes")
    assert good.returncode == 0, good.stderr
    old = write_spec(project / "old.yaml", base, {"envmgr-demo-old": "2.0", "idna": "3.7"})
    failed = envmgr(home, "apply", str(old), "--yes")
    assert failed.returncode == 1
    assert "envmgr-demo-old 2.0 needs idna<3, inherited 3.7" in failed.stderr
    assert Store(home).current().number == 1  # the working environment is untouched


def test_no_deps_locks_exactly_the_pins_with_hashes_of_the_local_wheels(project, base):
    spec = write_spec(project / "spec.yaml", base, {"envmgr-demo-app": "1.0", "idna": "3.7"}, no_deps=True)
    home = project / "state"
    applied = envmgr(home, "apply", str(spec), "--yes")
    assert applied.returncode == 0, applied.stderr
    gen = Store(home).current()
    # six is not resolved: the pins are the whole lock (uv gives no hash here; envmgr does)
    assert locked_versions(gen.lock) == {"envmgr-demo-app": "1.0"}
    assert gen.lock.count("--hash=sha256:") == 1
    ran = envmgr(home, "run", "--", "python", "-c", "import six")
    assert ran.returncode != 0 and "No module named 'six'" in ran.stderr


@pytest.mark.slow
def test_an_offline_image_takes_the_directorys_wheels_and_keeps_the_base_images_package(
        project, built_images, base_image, docker_client):
    """The image builder: the find-links wheels travel in the build's wheelhouse (the build has
    no network), and the base image's own wheel 0.38.4 (Debian's python3-wheel) is kept."""
    repository = built_images.add_repository(f"envmgr-test/offline-{os.getpid()}")
    spec = project / "image.yaml"
    spec.write_text(textwrap.dedent(f"""\
        apiVersion: envmgr/v1
        metadata: {{name: offline-image}}
        hardware: {{gpu: {{arch: sm_90}}}}
        python:
          version: "3.11"
          packages: {{envmgr-demo-app: "1.0", wheel: "0.38.4"}}
          sources: {{find_links: [wheels], offline: true}}
          inherit: {{python: /usr/bin/python3, packages: [wheel]}}
        env: {{DEMO: "1"}}
        realize: {{backend: docker, docker: {{base_image: "{base_image}", tag: "{repository}"}}}}
        """))
    home = project / "state"
    applied = envmgr(home, "apply", str(spec), "--yes")
    assert applied.returncode == 0, applied.stderr
    gen = Store(home).current()
    assert locked_versions(gen.lock) == {"envmgr-demo-app": "1.0", "idna": "3.7", "six": "1.16.0"}
    assert inherited_versions(gen.lock) == {"wheel": "0.38.4"}
    context = Path(gen.meta["details"]["context"])
    assert sorted(p.name for p in (context / "wheelhouse").iterdir()) == sorted(
        p.name for p in (project / "wheels").iterdir() if not p.name.startswith("envmgr_demo_old"))
    assert "/usr/lib/python3/dist-packages" in (context / "inherit.pth").read_text()

    ran = envmgr(home, "run", "--", "python", "-c",
                 "import envmgr_demo_app, six, wheel, sys; print(wheel.__file__); print('pip' in sys.modules)")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0].startswith("/usr/lib/python3/dist-packages/wheel")
    status = envmgr(home, "status")
    assert status.returncode == 0 and "no drift" in status.stdout, status.stdout + status.stderr
    container = docker_client.containers.run(gen.meta["details"]["image"], ["sleep", "300"], detach=True,
                                             auto_remove=True)
    try:
        verify = envmgr(home, "verify", str(spec), "--hosts", f"docker://{container.name}",
                        "--lock", str(gen.path / "lock.txt"), "--json")
    finally:
        container.kill()
    assert verify.returncode == 0, verify.stdout + verify.stderr
    checks = {r["check"]: r for r in json.loads(verify.stdout)["results"]}
    assert checks["inherited:wheel"]["ok"] and "/usr/lib/python3/dist-packages" in checks["inherited:wheel"]["found"]
