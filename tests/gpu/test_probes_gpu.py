"""Every single-GPU probe on a real GPU: pass, or skip with its reason; predictions agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
SINGLE_GPU = ["gpu", "toolchain_arch", "torch_cuda", "flashinfer_jit", "flashinfer_allreduce_fusion",
              "p2p", "symm_mem", "nccl_allreduce", "nccl_alltoall"]


def test_every_probe_passes_or_skips_with_a_reason(tmp_path):
    out = subprocess.run([sys.executable, "-m", "envmgr", "probe", "--target", "local://", "--spec",
                          str(ROOT / "specs" / "h200.yaml"), "--json", "--home", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    report = json.loads(out.stdout)
    by_id = {r["probe"]: r for r in report["results"]}
    assert set(by_id) == set(SINGLE_GPU)
    for probe, result in by_id.items():
        assert result["status"] in ("pass", "skip"), (probe, result["summary"])
        if result["status"] == "skip":
            assert result["summary"], probe
        assert result["agreement"] != "DISAGREE", (probe, result)
    assert by_id["gpu"]["status"] == "pass" and by_id["torch_cuda"]["status"] == "pass"
    assert report["ok"] is True
