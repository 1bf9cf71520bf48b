"""The whole Docker path as an operator drives it: `envmgr apply --backend docker://...`
makes generations of images built on the locally bootstrapped base; an unchanged spec
is not rebuilt; one changed pin gives a new image and a new generation; `envmgr verify`
passes on a container of the image and, after a pin is changed by hand inside the
container, fails naming the host, the package, expected and found."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from envmgr.state import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # about 40 s: two image builds through the CLI

SPEC = """\
apiVersion: envmgr/v1
metadata: {{name: docker-apply}}
hardware: {{gpu: {{arch: sm_90}}}}
python:
  version: "3.11"
  packages: {{packaging: "24.2", six: "{six}"}}
env: {{ENVMGR_DEMO: "docker"}}
"""


def envmgr(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envmgr", *args], capture_output=True, text=True,
                          env={**os.environ, "ENVMGR_HOME": str(home)}, check=False)


@pytest.fixture
def repository(built_images):
    """Removed at the end of the session with the parents and build stages its builds made."""
    return built_images.add_repository(f"envmgr-test/apply-{uuid.uuid4().hex[:8]}")


def test_apply_generations_and_verify_in_a_container(tmp_path, docker_client, base_image, repository):
    home, spec = tmp_path / "home", tmp_path / "spec.yaml"
    url = f"docker://{repository}?base={base_image}&wheelhouse=1"
    spec.write_text(SPEC.format(six="1.16.0"))

    first = envmgr(home, "apply", str(spec), "--backend", url, "--yes")
    assert first.returncode == 0, first.stderr
    store = Store(home)
    gen1 = store.current()
    assert gen1.number == 1 and gen1.meta["backend_kind"] == "docker"
    image1 = gen1.meta["details"]["image"]

    again = envmgr(home, "apply", str(spec), "--backend", url, "--yes")
    assert again.returncode == 0 and "unchanged: generation 1" in again.stdout, again.stderr
    assert [g.number for g in store.generations()] == [1]

    spec.write_text(SPEC.format(six="1.17.0"))
    second = envmgr(home, "apply", str(spec), "--backend", url, "--yes")
    assert second.returncode == 0, second.stderr
    gen2 = store.current()
    image2 = gen2.meta["details"]["image"]
    assert gen2.number == 2 and image2 != image1
    assert docker_client.images.get(image1).id != docker_client.images.get(image2).id
    status = envmgr(home, "status")  # facts collected in containers of the image
    assert status.returncode == 0 and "no drift" in status.stdout, status.stdout + status.stderr
    # verify of the image generation, no --hosts: a throwaway container of its image, removed after
    before = {c.id for c in docker_client.containers.list(all=True)}
    own = envmgr(home, "verify", "--json")
    assert own.returncode == 0, own.stdout + own.stderr
    report = json.loads(own.stdout)
    assert report["ok"] is True and any(r["check"] == "package:six" for r in report["results"])
    assert all(r["host"].startswith("docker://") for r in report["results"])
    assert {c.id for c in docker_client.containers.list(all=True)} == before  # none left behind

    container = docker_client.containers.run(image2, ["sleep", "infinity"], detach=True,
                                             network_mode="none", name=f"envmgr-verify-{uuid.uuid4().hex[:8]}")
    try:
        args = ["verify", str(spec), "--hosts", f"docker://{container.name}", "--lock",
                str(gen2.path / "lock.txt"), "--python", "/opt/envmgr/venv/bin/python", "--json"]
        passed = envmgr(home, *args)
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert json.loads(passed.stdout)["ok"] is True

        # change the pin by hand inside the container: six 1.16.0 from a wheel copied in
        wheels = tmp_path / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "-d", str(wheels), "six==1.16.0"], check=True)
        (wheel,) = wheels.glob("six-*.whl")
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.add(wheel, arcname=wheel.name)
        container.put_archive("/tmp", archive.getvalue())
        code, out = container.exec_run(["/opt/envmgr/venv/bin/python", "-m", "pip", "install", "--quiet",
                                        "--no-index", f"/tmp/{wheel.name}"])
        assert code == 0, out

        failed = envmgr(home, *args)
        assert failed.returncode == 1
        report = json.loads(failed.stdout)
        (bad,) = [r for r in report["results"] if not r["ok"]]
        assert bad["check"] == "package:six"
        assert bad["host"] == f"docker://{container.name}"
        assert "1.17.0" in bad["expected"] and bad["found"] == "1.16.0"
    finally:
        container.remove(force=True)

    back = envmgr(home, "rollback")
    assert back.returncode == 0 and store.current().number == 1
