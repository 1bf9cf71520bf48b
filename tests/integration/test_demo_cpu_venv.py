"""The CPU demo spec realized for real: a CUDA 13.0 nvcc from pip wheels in a venv,
found by `run` through the CUDA_HOME/PATH the venv target exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.apply import apply
from envmgr.builders.venv import VenvBuilder
from envmgr.facts import collect_facts
from envmgr.spec import load_spec
from envmgr.state import Store
from envmgr.targets.venv import VenvTarget

pytestmark = pytest.mark.integration
SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_demo_cpu_venv_has_nvcc_13(tmp_path: Path):
    lines: list[str] = []
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    with VenvBuilder() as builder:
        result = apply(loaded, builder, Store(tmp_path), lines.append, confirm=lambda actions, steps: True)
    assert result.status == "applied"
    assert any(line.startswith("[3/4] install the lock with uv") for line in lines)  # progress was shown

    with VenvTarget(result.generation.location) as venv:
        nvcc = venv.run(["nvcc", "--version"])
        assert nvcc.returncode == 0
        assert "release 13.0, V13.0.88" in nvcc.stdout
        facts = collect_facts(venv, python=venv.interpreter)
    jit = facts.jit_nvcc()
    assert jit is not None and jit.origin == "CUDA_HOME" and jit.release == "13.0"
    assert facts.python is not None
    # nvcc's own dependencies were held on 13.0 by the spec (they would float to 13.5)
    assert facts.python.packages["nvidia-nvvm"].startswith("13.0.")
    assert facts.python.packages["nvidia-cuda-crt"].startswith("13.0.")


def test_failing_probe_gate_keeps_the_previous_generation_current(tmp_path: Path):
    loaded = load_spec(SPECS / "demo-cpu.yaml")
    store = Store(tmp_path)
    with VenvBuilder() as builder:
        first = apply(loaded, builder, store, lambda line: None, confirm=lambda actions, steps: True)
    assert first.status == "applied"
    changed = tmp_path / "changed.yaml"
    changed.write_text((SPECS / "demo-cpu.yaml").read_text().replace('ENVMGR_DEMO: "1"', 'ENVMGR_DEMO: "2"'))
    calls = []

    def gate(generation, target):
        assert target.url == f"venv://{generation.location}"  # the gate probes what was built
        calls.append(generation.number)
        return ["toolchain_arch"]

    with VenvBuilder() as builder:
        second = apply(load_spec(changed), builder, store, lambda line: None,
                       confirm=lambda actions, steps: True, gate=gate)
    assert second.status == "probes-failed" and calls == [2]
    assert store.current().number == 1  # not switched
    assert [g.number for g in store.generations()] == [1, 2]  # kept for inspection
    assert store.get(2).gate == "failed" and store.get(1).gate == "passed"
    from envmgr.apply import rollback_refusal

    assert "failed its probe gate (toolchain_arch)" in rollback_refusal(store.get(2))
    assert rollback_refusal(store.get(1)) is None
