"""envmgr init (issue 29): a starting spec from a host's facts, that loads, plans no changes
from the facts it came from, copies no secret, and never replaces a file unasked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envmgr.cli import main
from envmgr.facts.model import Facts, GpuFact, PythonFact, ToolkitFact
from envmgr.initspec import segment_of, spec_data
from envmgr.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
H200_FACTS = ROOT / "docs" / "evidence" / "h200-facts" / "facts.json"  # envmgr facts --json on the real H200


def test_a_spec_from_real_facts_loads_and_plans_no_changes_from_them(tmp_path, capsys):
    out = tmp_path / "h200.yaml"
    assert main(["init", "h200", "--facts", str(H200_FACTS), "-o", str(out)]) == 0
    spec = load_spec(out).spec
    assert spec.hardware.gpu.arch == "sm_90" and spec.hardware.gpu.model == "NVIDIA H200"
    assert spec.python.packages["torch"] == "==2.11.0"  # installed, pinned exactly
    capsys.readouterr()
    assert main(["plan", str(out), "--facts", str(H200_FACTS)]) == 0  # 0: no changes
    assert "no changes" in capsys.readouterr().out


def test_toolkits_the_selected_one_and_only_cuda_home_of_the_env():
    facts = Facts(driver_version="580.95.05",
                  gpus=[GpuFact(index=i, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                                compute_capability="12.0", memory_mib=97887) for i in range(8)],
                  toolkits=[ToolkitFact(path="/usr/local/cuda-12.8", version="12.8"),
                            ToolkitFact(path="/usr/local/cuda-13.0", version="13.0")],
                  python=PythonFact(executable="/usr/bin/python3", version="3.12.3",
                                    packages={"torch": "2.9.1+cu128", "sglang": "0.5.9", "requests": "2.32.0"}),
                  env={"CUDA_HOME": "/usr/local/cuda-13.0", "HF_TOKEN": "hf_secret"})
    data = spec_data("blackwell", facts)
    assert data["hardware"]["gpu"] == {"arch": "sm_120", "count": 8, "segment": "workstation", "memory_gb": 95.6,
                                       "model": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}
    assert data["cuda"] == {"toolkits": [{"version": "12.8", "source": "apt"}, {"version": "13.0", "source": "apt"}],
                            "select": "13.0"}
    assert data["python"] == {"version": "3.12", "torch_cuda": "cu128",
                              "packages": {"torch": "2.9.1+cu128", "sglang": "0.5.9"}}  # the stack's, not requests
    assert data["env"] == {"CUDA_HOME": "/usr/local/cuda-13.0"}  # never HF_TOKEN
    assert "hf_secret" not in yaml.safe_dump(data)


@pytest.mark.parametrize(("model", "segment"), [
    ("NVIDIA GeForce RTX 5090", "geforce"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "workstation"),
    ("NVIDIA H200", "datacenter"), ("NVIDIA Jetson AGX Orin", "embedded"), ("NVIDIA RTX A6000", "workstation"),
])
def test_the_segment_is_read_from_the_gpus_name(model, segment):
    assert segment_of(model) == segment


def test_an_existing_file_is_kept_unless_forced(tmp_path, capsys):
    out = tmp_path / "mine.yaml"
    out.write_text("keep: me\n")
    assert main(["init", "h200", "--facts", str(H200_FACTS), "-o", str(out)]) == 1
    assert "exists" in capsys.readouterr().err and out.read_text() == "keep: me\n"
    assert main(["init", "h200", "--facts", str(H200_FACTS), "-o", str(out), "--force"]) == 0
    assert load_spec(out).spec.metadata.name == "h200"


def test_a_name_the_spec_refuses_is_said_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "x.yaml"
    assert main(["init", "Bad Name!", "--facts", str(H200_FACTS), "-o", str(out)]) == 1
    assert "metadata.name" in capsys.readouterr().err and not out.exists()
