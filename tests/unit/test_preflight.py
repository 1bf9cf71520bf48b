"""The bench's pre-launch checks of the environment (envmgr.bench.preflight): the host script
run for real here, the parsers on real outputs, and what each fact makes of a launch."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from envmgr.bench import preflight
from envmgr.bench.preflight import HostFacts, host_findings, parse_fabric_states, parse_host_report
from envmgr.targets.local import LocalTarget

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "h200-triage-round1"
GIB = 1 << 30


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def test_the_host_script_runs_in_a_real_python_and_reads_back(tmp_path):
    facts = preflight.gather(LocalTarget(), sys.executable, {"TRITON_CACHE_DIR": str(tmp_path / "not" / "made")})
    names = {name: path for name, path, _ in facts.cache_free}
    assert set(names) == {"flashinfer", "triton", "huggingface", "tmp"}
    assert names["triton"] == str(tmp_path)  # a cache not made yet fills its nearest existing parent
    assert all(free >= 0 for _, _, free in facts.cache_free)
    assert facts.shm_total is None or facts.shm_total >= facts.shm_free >= 0


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"shm": "x", "caches": {"a": [1, 2]}}'])
def test_a_report_that_is_not_the_script_s_is_nothing_known(text):
    facts = parse_host_report(text)
    assert facts.shm_total is None and facts.cache_free == ()


def test_fabric_states_from_the_real_h200_and_from_a_waiting_hgx():
    real = EVIDENCE / "nvidia-smi-q.txt"  # the H200 the GPU runs use: not on a trained fabric
    assert parse_fabric_states(real.read_text()) == ("N/A",)
    waiting = ("GPU 00000000:18:00.0\n    Fabric\n        State                             : In Progress\n"
               "        Status                            : N/A\n")
    assert parse_fabric_states(waiting) == ("In Progress",)


def test_a_fabric_in_training_blocks_the_launch():
    [finding] = host_findings(HostFacts(fabric_states=("Completed", "In Progress")), gpus=8)
    assert finding.id == "fabric-manager-not-ready" and finding.fatal and "802" in finding.message
    assert host_findings(HostFacts(fabric_states=("Completed", "N/A")), gpus=8) == []


def test_small_shm_warns_only_for_more_than_one_gpu():
    docker_default = HostFacts(shm_total=64 << 20, shm_free=60 << 20)
    [finding] = host_findings(docker_default, gpus=2)
    assert finding.id == "shm-too-small" and finding.severity == "warning" and "64 MiB" in finding.message
    assert host_findings(docker_default, gpus=1) == []
    assert host_findings(HostFacts(shm_total=16 * GIB, shm_free=16 * GIB), gpus=8) == []


def test_a_nearly_full_cache_disk_warns_with_where():
    facts = HostFacts(cache_free=(("flashinfer", "/root", 1 * GIB), ("tmp", "/tmp", 50 * GIB)))
    [finding] = host_findings(facts, gpus=1)
    assert finding.id == "cache-disk-nearly-full" and "/root" in finding.message and "1.0 GiB" in finding.message


def test_a_taken_port_is_an_error_finding():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert preflight.port_taken("127.0.0.1", port)
        [finding] = host_findings(HostFacts(), 1, port, preflight.port_taken("127.0.0.1", port), ("baseline",))
    assert finding.id == "port-in-use" and finding.fatal and finding.configs == ("baseline",)
    assert str(port) in finding.fix
    assert not preflight.port_taken("127.0.0.1", port)
