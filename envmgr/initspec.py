"""``envmgr init NAME``: a starting spec from a host's facts (``envmgr facts``), to review.

What the facts know goes in as they read it (the same reading ``plan`` makes of facts,
``plan.state_from_facts``): the GPUs (arch, count, model, memory; the segment from the model's
name), the driver, the toolkits with the one in use selected, the Python version, and the
installed versions of the stack's packages (torch with its CUDA build, FlashInfer, SGLang, its
kernels, vLLM, Triton, transformers, NCCL). What they cannot know is left at its default and
said in the file's header: the interconnect, an apt or runfile toolkit, realize, probes and
benchmarks. No environment variable but ``CUDA_HOME`` is copied (a host's env holds secrets).
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path
from typing import Any

import yaml

from envmgr.facts.model import Facts
from envmgr.plan import state_from_facts
from envmgr.spec.load import load_spec

STACK = ("torch", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "sglang", "sgl-kernel",
         "sglang-kernel", "vllm", "triton", "transformers", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "deep-ep")
COPIED_ENV = ("CUDA_HOME",)
SEGMENTS = (("geforce", "geforce"), ("rtx pro", "workstation"), ("quadro", "workstation"), ("rtx a", "workstation"),
            ("jetson", "embedded"), ("orin", "embedded"), ("thor", "embedded"))
HEADER = """\
# Started by `envmgr init` from the facts of {label} on {date}. Review it before applying:
# - hardware.interconnect is pcie unless you set nvlink; the segment was read from the GPU's name;
# - system toolkits are written as `source: apt` (a runfile install reads the same);
# - only the stack's packages are pinned, at the versions installed: add what else you need;
# - realize (venv by default), probes and benchmarks are yours to add.
# Then: envmgr validate {file}; envmgr plan {file}
"""


def segment_of(model: str) -> str:
    lowered = model.lower()
    return next((segment for word, segment in SEGMENTS if word in lowered), "datacenter")


def spec_data(name: str, facts: Facts, label: str = "a host") -> dict[str, Any]:
    """The spec, as plain data, that these facts describe."""
    state = state_from_facts(facts)
    data: dict[str, Any] = {"apiVersion": "envmgr/v1", "kind": "Environment",
                            "metadata": {"name": name, "description": f"started from the facts of {label}"}}
    if facts.gpus:
        first = facts.gpus[0]
        gpu: dict[str, Any] = {"arch": first.arch, "count": sum(g.arch == first.arch for g in facts.gpus),
                               "model": first.name, "segment": segment_of(first.name)}
        if first.memory_mib:
            gpu["memory_gb"] = round(first.memory_mib / 1024, 1)
        data["hardware"] = {"gpu": gpu}
    if state.driver:
        data["driver"] = {"version": state.driver}
    toolkits = [{"version": version, "source": "pip" if kind == "pip" else "apt"}
                for version, kind in state.toolkits if version]
    if toolkits:
        data["cuda"] = {"toolkits": toolkits, **({"select": state.selected_toolkit} if state.selected_toolkit else {})}
    python: dict[str, Any] = {"version": ".".join((state.python or "3.12").split(".")[:2])}
    if state.torch_cuda:
        python["torch_cuda"] = state.torch_cuda
    python["packages"] = {p: state.packages[p] for p in STACK if p in state.packages}
    data["python"] = python
    env = {k: state.env[k] for k in COPIED_ENV if state.env.get(k)}
    if env:
        data["env"] = env
    data["realize"] = {"backend": "venv"}
    return data


def spec_text(name: str, facts: Facts, label: str, file: str) -> str:
    """The spec file: the header, then the data; checked to load before anyone writes it."""
    text = (HEADER.format(label=label, date=datetime.date.today().isoformat(), file=file)
            + yaml.safe_dump(spec_data(name, facts, label), sort_keys=False))
    with tempfile.TemporaryDirectory(prefix="envmgr-init-") as scratch:
        trial = Path(scratch) / "spec.yaml"
        trial.write_text(text, encoding="utf-8")
        load_spec(trial)  # what init writes always loads; a SpecError here is envmgr's bug, said as such
    return text
