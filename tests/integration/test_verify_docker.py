"""envmgr verify against a real container through testinfra's docker:// backend.

A container of the base image (no network) gets a venv with a tiny hand-made wheel,
envmgr-probe-dummy, and a fake CUDA 13.0 layout (an nvcc script under
/usr/local/cuda-13.0, the /usr/local/cuda link, CUDA_HOME). verify passes; after 1.1
replaces 1.0 it fails naming the host, the check, expected and found. The pytest plugin
is run the same way, in a subprocess, as a user's CI would.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from envmgr.errors import BackendError
from envmgr.spec import load_spec
from envmgr.verify import verify

pytestmark = pytest.mark.integration

docker = pytest.importorskip("docker", reason="the docker Python SDK is not installed")
pytest.importorskip("testinfra", reason="pytest-testinfra is not installed")
from docker.errors import DockerException, ImageNotFound  # noqa: E402

IMAGE = os.environ.get("ENVMGR_BASE_IMAGE", "envmgr/base:bookworm")
VENV_PYTHON = "/venv/bin/python"
WHEELS_DIR = "/tmp/wheels"
PACKAGE = "envmgr-probe-dummy"
FAKE_NVCC = "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n"

SPEC_YAML = """\
apiVersion: envmgr/v1
metadata: {name: verify-docker}
hardware: {gpu: {arch: sm_90}}
cuda:
  toolkits: [{version: "13.0.2", source: image}]
python:
  version: "3.11"
  packages: {envmgr-probe-dummy: "1.0"}
env:
  CUDA_HOME: /usr/local/cuda
  ENVMGR_PROBE: "on"
"""


def dummy_wheel(version: str) -> tuple[str, bytes]:
    """(file name, bytes) of a pure-Python wheel, RECORD hashes included, made without pip."""
    module, dist_info = "envmgr_probe_dummy", f"envmgr_probe_dummy-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envmgr-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return f"envmgr_probe_dummy-{version}-py3-none-any.whl", buffer.getvalue()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def exec_ok(container, argv: list[str]) -> str:
    code, output = container.exec_run(argv)
    text = output.decode(errors="replace")
    assert code == 0, f"{argv} exited {code}: {text[-2000:]}"
    return text


@pytest.fixture(scope="module")
def container():
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except DockerException as exc:
        pytest.skip(f"docker daemon not reachable: {exc}")
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        pytest.skip(f"base image {IMAGE} is missing (build it with images/bootstrap-base.sh)")
    box = client.containers.run(
        IMAGE, ["sleep", "infinity"], name=f"envmgr-verify-{uuid.uuid4().hex[:12]}",
        detach=True, network_disabled=True, environment={"CUDA_HOME": "/usr/local/cuda", "ENVMGR_PROBE": "on"},
    )
    try:
        wheels = dict(dummy_wheel(v) for v in ("1.0", "1.1"))
        exec_ok(box, ["mkdir", "-p", WHEELS_DIR, "/usr/local/cuda-13.0/bin"])
        box.put_archive(WHEELS_DIR, tar_of(wheels))
        box.put_archive("/usr/local/cuda-13.0/bin", tar_of({"nvcc": FAKE_NVCC.encode()}))
        exec_ok(box, ["chmod", "755", "/usr/local/cuda-13.0/bin/nvcc"])
        exec_ok(box, ["ln", "-s", "/usr/local/cuda-13.0", "/usr/local/cuda"])
        exec_ok(box, ["python3", "-m", "venv", "/venv"])
        yield box
    finally:
        box.remove(force=True)
        client.close()


@pytest.fixture
def install(container):
    def install_version(version: str) -> None:
        exec_ok(container, ["/venv/bin/pip", "install", "--no-index", "--no-deps", "--force-reinstall",
                            "--disable-pip-version-check", "-q",
                            f"{WHEELS_DIR}/envmgr_probe_dummy-{version}-py3-none-any.whl"])
    return install_version


@pytest.fixture
def spec_file(tmp_path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_YAML, encoding="utf-8")
    return path


def run_plugin(spec_file: Path, host: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", "-p", "envmgr.verify.plugin", "-p", "no:cacheprovider",
            "--envmgr-spec", str(spec_file), "--envmgr-python", VENV_PYTHON, "--hosts", host, "-v"]
    return subprocess.run(argv, cwd=spec_file.parent, capture_output=True, text=True, timeout=300)


def test_verify_passes_then_names_the_drifted_package(container, install, spec_file):
    host = f"docker://{container.name}"
    spec = load_spec(spec_file).spec
    install("1.0")
    results = verify(spec, [host], python=VENV_PYTHON)
    assert [r.check for r in results] == ["python:version", "package:envmgr-probe-dummy", "nvcc:version",
                                          "cuda:link", "env:CUDA_HOME", "env:ENVMGR_PROBE"]
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]

    install("1.1")  # drift: someone upgraded by hand
    (failed,) = [r for r in verify(spec, [host], python=VENV_PYTHON) if not r.ok]
    assert (failed.host, failed.check, failed.expected, failed.found) == (host, "package:envmgr-probe-dummy", "==1.0", "1.1")
    assert failed.message == f"{host}: package:envmgr-probe-dummy: expected ==1.0, found 1.1"


def test_lock_mismatch_is_named(container, install, spec_file):
    host = f"docker://{container.name}"
    install("1.0")
    spec = load_spec(spec_file).spec.model_copy(deep=True)
    spec = spec.model_validate({**spec.model_dump(), "python": {"version": "3.11", "packages": {PACKAGE: ">=1"}}})
    (failed,) = [r for r in verify(spec, [host], lock=f"{PACKAGE}==1.1\n", python=VENV_PYTHON) if not r.ok]
    assert failed.message == f"{host}: package:envmgr-probe-dummy: expected >=1 (locked 1.1), found 1.0"


def test_pytest_plugin_passes_then_fails_naming_the_mismatch(container, install, spec_file):
    host = f"docker://{container.name}"
    install("1.0")
    passing = run_plugin(spec_file, host)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "6 passed" in passing.stdout
    assert f"test_envmgr_check[{host}-package:envmgr-probe-dummy] PASSED" in passing.stdout

    install("1.1")
    failing = run_plugin(spec_file, host)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert f"{host}: package:envmgr-probe-dummy: expected ==1.0, found 1.1" in failing.stdout
    assert "1 failed, 5 passed" in failing.stdout


def test_missing_container_is_a_backend_error_naming_the_host(spec_file):
    host = f"docker://envmgr-no-such-{uuid.uuid4().hex[:8]}"
    with pytest.raises(BackendError, match=host):
        verify(load_spec(spec_file).spec, [host], python=VENV_PYTHON)


def test_pytest_plugin_names_an_unreachable_host(spec_file):
    host = f"docker://envmgr-no-such-{uuid.uuid4().hex[:8]}"
    out = run_plugin(spec_file, host)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{host}: cannot run commands" in out.stdout
    assert "6 errors" in out.stdout
