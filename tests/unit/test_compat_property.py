"""Any spec that validates can be checked and planned without an exception."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from envmgr.compat import default_knowledge_base, evaluate
from envmgr.facts.model import CompilerFact, Facts, GpuFact, PythonFact
from envmgr.plan import plan, state_from_facts, state_from_spec
from envmgr.spec import Spec

VERSIONS = st.sampled_from(["2.9.1", "==2.11.0", ">=2.9,<2.12", "~=0.6.3", "===weird", "0!1.0",
                            "2.9.1+cu128", "==0.6.*", "!=1.0", "<1", "0.5.15rc1", "1.0.post2.dev3"])
ARCHS = st.from_regex(r"sm_[0-9]{2,3}[af]?", fullmatch=True)
FLAG_VALUES = st.one_of(st.booleans(), st.none(), st.integers(-5, 10), st.text(max_size=12),
                        st.sampled_from(["flashinfer", "flashinfer_cutlass", "EAGLE3", "tree"]))
FLAGS = st.dictionaries(
    st.sampled_from(["--tp-size", "--dp-size", "--enable-torch-symm-mem", "--moe-a2a-backend",
                     "--moe-runner-backend", "--speculative-algorithm", "--enable-dp-attention",
                     "--enable-flashinfer-allreduce-fusion", "--cuda-graph-max-bs", "--x-y"]),
    FLAG_VALUES, max_size=6)
PACKAGES = st.dictionaries(
    st.sampled_from(["torch", "sglang", "flashinfer-python", "flashinfer-cubin", "sgl-kernel",
                     "sglang-kernel", "flashinfer-jit-cache", "nvidia-nccl-cu12", "nvidia-nccl-cu13"]),
    VERSIONS, max_size=7)
TOOLKITS = st.lists(st.sampled_from(["11.8", "12.6", "12.8", "12.9", "13.0", "13.0.2", "99.9"]),
                    min_size=1, max_size=3, unique=True)


@st.composite
def specs(draw):
    toolkits = draw(TOOLKITS)
    data = {
        "apiVersion": "envmgr/v1",
        "metadata": {"name": "prop"},
        "hardware": {"gpu": {"arch": draw(ARCHS), "count": draw(st.integers(1, 16)),
                             "segment": draw(st.sampled_from(["datacenter", "workstation", "geforce"]))},
                     "interconnect": draw(st.sampled_from(["pcie", "nvlink"]))},
        "driver": {"version": draw(st.sampled_from(["570.124.06", ">=580", "<500", "===x", "525"])),
                   "forward_compat": draw(st.booleans())},
        "cuda": {"toolkits": [{"version": v, "source": draw(st.sampled_from(["apt", "pip"]))}
                              for v in toolkits]},
        "python": {"torch_cuda": draw(st.sampled_from([None, "cu118", "cu128", "cu130", "cu999"])),
                   "packages": draw(PACKAGES)},
        "env": draw(st.dictionaries(st.sampled_from(["NCCL_ALGO", "FLASHINFER_CUDA_ARCH_LIST", "CUDA_HOME"]),
                                    st.text(max_size=8), max_size=3)),
        "benchmarks": {"model_path": "/m", "server_flags": draw(FLAGS),
                       "configs": {"a": {"flags": draw(FLAGS)}, "b": {}},
                       "load": {"dataset": draw(st.sampled_from(["random-ids", "random"]))}},
    }
    if data["python"]["torch_cuda"] is None:
        del data["python"]["torch_cuda"]
    try:
        return Spec.model_validate(data)
    except ValidationError:  # a draw that does not validate (e.g. ===x driver) is dropped
        reject()


FACTS = st.builds(
    Facts,
    driver_version=st.sampled_from([None, "580.95.05", "bogus"]),
    nvml_error=st.sampled_from([None, "Failed to initialize NVML: Driver/library version mismatch"]),
    gpus=st.lists(st.builds(GpuFact, index=st.just(0), name=st.just("GPU"),
                            compute_capability=st.sampled_from(["9.0", "12.0", "7.5"])), max_size=2),
    compilers=st.lists(st.builds(CompilerFact, path=st.just("/x/nvcc"), kind=st.just("nvcc"),
                                 version=st.sampled_from(["12.8.93", "13.0.88", "x"]),
                                 release=st.sampled_from(["12.8", "13.0", "x"]),
                                 origin=st.sampled_from(["CUDA_HOME", "PATH"])), max_size=2),
    python=st.one_of(st.none(), st.builds(PythonFact, executable=st.just("py"), version=st.just("3.12.1"),
                                          packages=st.dictionaries(st.sampled_from(["torch", "sglang"]),
                                                                   st.sampled_from(["2.9.1+cu128", "junk"])))),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(spec=specs(), observed=st.one_of(st.none(), FACTS))
def test_any_valid_spec_evaluates_and_plans(spec, observed):
    findings = evaluate(spec, observed)
    kb = default_knowledge_base()
    for f in findings:
        assert f.message and f.fix and f.severity in ("error", "warning", "info")
        if f.id.startswith("flag-"):  # a flag check (envmgr/compat/flags.py), not a rule
            continue
        for template_field in re.findall(r"\{\w+\}", kb.rule(f.id).message):
            assert template_field not in f.message  # every template field was filled
    plan(state_from_spec(spec), spec)
    if observed is not None:
        plan(state_from_facts(observed), spec)

