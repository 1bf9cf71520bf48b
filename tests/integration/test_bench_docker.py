"""The launcher with the docker:// backend: the SGLang TEST DOUBLE runs in a real container
(host network, init process), built on the local base image; ready and crash detection, and
teardown that leaves no container behind."""

from __future__ import annotations

import io
import secrets
import tarfile
from pathlib import Path

import pytest
from ports import free_port

from envmgr.bench.command import ServerCommand
from envmgr.bench.launch import Limits, RunningServer
from envmgr.targets.container import ContainerTarget

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # about 20 s: the double's image build, a matrix with load

DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "sglang_double"
@pytest.fixture(scope="module")
def double_image(docker_client, base_image, built_images) -> str:
    """The base image plus the double's package on PYTHONPATH (built through the real daemon),
    under a tag of its own; removed with its build steps at the end of the session."""
    tag = built_images.add(f"envmgr-test/sglang-double:{secrets.token_hex(4)}")
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        # The venv where envmgr's images keep the environment (ContainerTarget.interpreter).
        dockerfile = (f"FROM {base_image}\nRUN python3 -m venv /opt/envmgr/venv\n"
                      "COPY sglang_double /opt/sglang_double\n"
                      "ENV PYTHONPATH=/opt/sglang_double\n").encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(DOUBLE, arcname="sglang_double",
                filter=lambda t: None if "__pycache__" in t.name else t)
    context.seek(0)
    docker_client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True)
    return tag


def running_containers(docker_client, image: str) -> list:
    return [c for c in docker_client.containers.list(all=True) if image in c.image.tags]


@pytest.mark.parametrize("scenario, status, finding", [
    ("ready", "ready", None),
    ("kv_pool_oom", "crashed", "kv_pool_oom"),
    ("assert_after_weights", "crashed", "ep_expert_location_assert"),
])
def test_server_in_a_container(docker_client, double_image, tmp_path, scenario, status, finding):
    port = free_port()
    argv = ("python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.5-INT4",
            "--tp-size", "8", "--host", "127.0.0.1", "--port", str(port))
    cmd = ServerCommand("test", argv, {"SGLANG_DOUBLE_SCENARIO": scenario, "SGLANG_DOUBLE_DELAY": "0.01"},
                        "127.0.0.1", port)
    with ContainerTarget(f"docker://{double_image}") as backend:
        with RunningServer(backend, cmd, tmp_path / "server.log", Limits(startup_s=60, stall_s=10, grace_s=3)) as server:
            result = server.wait_ready()
    assert result.status == status, result
    if finding:
        assert result.findings[0].id == finding
        assert result.detected_after_s <= 5.0
    assert server.stopped_cleanly and server.leftovers == []
    assert running_containers(docker_client, double_image) == []
    assert "Load weight begin" in (tmp_path / "server.log").read_text()


def test_matrix_cells_in_an_image_with_load(docker_client, double_image, tmp_path, monkeypatch):
    """``envmgr bench --env docker://IMAGE``: server and bench_serving client each in a container."""
    import yaml

    from envmgr.bench.matrix import prepare, run_matrix

    bench = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "double-bench.yaml"
    spec = tmp_path / "bench.yaml"
    spec.write_text(yaml.safe_dump({"apiVersion": "envmgr/v1", "extends": str(bench),
                                    "metadata": {"name": "double-bench"},
                                    "benchmarks": {"server_flags": {"--port": free_port()}}}))
    monkeypatch.setenv("SGLANG_DOUBLE_DELAY", "0.01")
    cells = prepare(spec, ["baseline", "ep_flashinfer_a2a"], [f"docker://{double_image}"], tmp_path / "home")
    assert cells[0].command.argv[0] == "/opt/envmgr/venv/bin/python"
    run = run_matrix(cells)
    ok, crashed = run.results
    assert ok.outcome == "ok", ok
    assert ok.load.completed == 8 and ok.load.output_throughput > 0
    assert crashed.outcome == "crashed" and crashed.findings[0].id == "kv_pool_oom"
    assert running_containers(docker_client, double_image) == []
