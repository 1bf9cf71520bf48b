"""The CPU demo spec realized for real: a CUDA 13.0 nvcc from pip wheels in a venv,
found by `run` through the CUDA_HOME/PATH the backend exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.apply import apply
from envmgr.backends.venv import VenvBackend
from envmgr.spec import load_spec
from envmgr.state import Store

pytestmark = pytest.mark.integration
SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_demo_cpu_venv_has_nvcc_13(tmp_path: Path):
    lines: list[str] = []
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    with VenvBackend() as backend:
        result = apply(loaded, backend, Store(tmp_path), lines.append, confirm=lambda actions: True)
    assert result.status == "applied"
    assert any("installing the lock with uv" in line for line in lines)  # progress was shown

    with VenvBackend(result.generation.location) as venv:
        nvcc = venv.run(["nvcc", "--version"])
        assert nvcc.returncode == 0
        assert "release 13.0, V13.0.88" in nvcc.stdout
        facts = venv.facts()
    jit = facts.jit_nvcc()
    assert jit is not None and jit.origin == "CUDA_HOME" and jit.release == "13.0"
    assert facts.python is not None
    # nvcc's own dependencies were held on 13.0 by the spec (they would float to 13.5)
    assert facts.python.packages["nvidia-nvvm"].startswith("13.0.")
    assert facts.python.packages["nvidia-cuda-crt"].startswith("13.0.")


def test_failing_probe_gate_keeps_the_previous_generation_current(tmp_path: Path):
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    store = Store(tmp_path)
    with VenvBackend() as backend:
        first = apply(loaded, backend, store, lambda line: None, confirm=lambda actions: True)
    assert first.status == "applied"
    changed = tmp_path / "changed.yaml"
    changed.write_text((SPECS / "demo-cpu.yaml").read_text().replace('ENVMGR_DEMO: "1"', 'ENVMGR_DEMO: "2"'))
    calls = []

    def gate(generation, backend):
        calls.append(generation.number)
        return ["toolchain_arch"]

    with VenvBackend() as backend:
        second = apply(load_spec(changed), backend, store, lambda line: None,
                       confirm=lambda actions: True, gate=gate)
    assert second.status == "probes-failed" and calls == [2]
    assert store.current().number == 1  # not switched
    assert [g.number for g in store.generations()] == [1, 2]  # kept for inspection
    assert store.get(2).gate == "failed" and store.get(1).gate == "passed"
    from envmgr.apply import rollback_refusal

    assert "failed its probe gate (toolchain_arch)" in rollback_refusal(store.get(2))
    assert rollback_refusal(store.get(1)) is None
