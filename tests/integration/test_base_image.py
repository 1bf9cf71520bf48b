"""The locally bootstrapped base image (images/bootstrap-base.sh) against the real Docker daemon.

CI builds the image before the tests run; on a machine without a reachable daemon these tests
skip with the reason. ENVMGR_BASE_IMAGE names another tag to check (as the script reads it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

docker = pytest.importorskip("docker", reason="the docker Python SDK is not installed")
from docker.errors import DockerException, ImageNotFound, NotFound  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "images" / "bootstrap-base.sh"
IMAGE = os.environ.get("ENVMGR_BASE_IMAGE", "envmgr/base:bookworm")
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def client():
    try:
        cli = docker.from_env(timeout=30)
        cli.ping()
    except DockerException as exc:
        pytest.skip(f"docker daemon not reachable: {exc}")
    yield cli
    cli.close()


@pytest.fixture(scope="module")
def image(client):
    try:
        return client.images.get(IMAGE)
    except ImageNotFound:
        pass
    pytest.fail(
        f"base image {IMAGE} is missing: CI builds it before the tests with "
        f"images/bootstrap-base.sh (run that once on this machine)",
        pytrace=False,
    )


def run_in(client, image, argv: list[str]) -> tuple[int, str, str, str]:
    """Run argv in a fresh, network-less container and always remove it.

    Returns (exit code, stdout, stderr, container id)."""
    container = client.containers.create(image.id, command=argv, network_disabled=True)
    try:
        container.start()
        code = container.wait(timeout=RUN_TIMEOUT_S)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
        return code, out, err, container.id
    finally:
        container.remove(force=True)


def test_base_image_exists_with_the_expected_config(image):
    assert IMAGE in image.tags
    config = image.attrs["Config"]
    assert config["Cmd"] == ["/bin/bash"]
    assert any(e.startswith("PATH=") and "/usr/bin" in e for e in config["Env"])
    assert image.labels.get("io.envmgr.base.suite")


def test_container_runs_python3_with_venv_and_ensurepip(client, image):
    code, out, err, _ = run_in(
        client,
        image,
        ["python3", "-c", "import sys, venv, ensurepip, ssl; print('ok', sys.version_info[:2] >= (3, 11))"],
    )
    assert (code, out) == (0, "ok True\n"), err


def test_container_can_create_a_venv_with_pip(client, image):
    script = (
        "python3 -m venv /tmp/v && /tmp/v/bin/pip --version && "
        "/tmp/v/bin/python -c 'import sys; print(sys.prefix)'"
    )
    code, out, err, container_id = run_in(client, image, ["sh", "-c", script])
    assert code == 0, err
    pip_line, prefix = out.splitlines()[-2:]
    assert pip_line.startswith("pip ") and "/tmp/v/" in pip_line
    assert prefix == "/tmp/v"
    with pytest.raises(NotFound):  # the container is gone again
        client.containers.get(container_id)


def test_bootstrap_script_is_idempotent_when_the_image_exists(image):
    env = {k: v for k, v in os.environ.items() if k not in ("ENVMGR_BASE_REBUILD",)}
    proc = subprocess.run(
        ["bash", str(SCRIPT), IMAGE],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "already exists" in proc.stdout
    assert image.id in proc.stdout  # reused, not rebuilt (how fast: benchmarks/, never a timed test)
