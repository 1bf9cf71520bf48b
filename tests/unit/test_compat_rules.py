"""Every rule of the knowledge base: one case that fires it and one that does not.

Cases are overlays (deep-merged, null deletes) on CLEAN, a stack on which no rule
fires; a new rule without cases here fails ``test_every_rule_has_cases``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from envmgr.compat import default_knowledge_base, evaluate
from envmgr.compat.context import CONFIG_FACTS, DYNAMIC_PREFIXES, STACK_FACTS
from envmgr.facts.model import CompilerFact, Facts, GpuFact
from envmgr.spec import Spec, deep_merge

CLEAN = {
    "apiVersion": "envmgr/v1",
    "metadata": {"name": "clean"},
    "hardware": {"gpu": {"arch": "sm_120", "count": 8, "segment": "workstation"},
                 "interconnect": "pcie"},
    "driver": {"version": "580.95.05"},
    "cuda": {"toolkits": [{"version": "13.0"}]},
    "python": {
        "version": "3.12",
        "torch_cuda": "cu130",
        "packages": {"sglang": "0.5.15", "torch": "2.11.0", "flashinfer-python": "0.6.12",
                     "flashinfer-cubin": "0.6.12", "sglang-kernel": "0.4.4"},
    },
    "env": {"NCCL_P2P_DISABLE": "1", "CUDA_HOME": "/usr/local/cuda-13.0"},
    "benchmarks": {
        "model_path": "/models/m",
        "server_flags": {"--tp-size": 8, "--disable-custom-all-reduce": True},
        "configs": {"baseline": {}},
    },
}


TINY_MOE = {"benchmarks": {"model_path": str(Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny-qwen3moe")}}


def cfg(flags=None, env=None):
    """An overlay adding a benchmark config ``x`` with these flags/env."""
    return {"benchmarks": {"configs": {"x": {"flags": flags or {}, "env": env or {}}}}}


SM90 = {"hardware": {"gpu": {"arch": "sm_90", "segment": "datacenter"}}}
OLD_SGLANG = {"python": {"torch_cuda": "cu128", "packages": {
    "sglang": "0.5.9", "torch": "2.9.1", "flashinfer-python": "0.6.3", "flashinfer-cubin": "0.6.3",
    "sglang-kernel": None, "sgl-kernel": "0.3.21"}},
    "driver": {"version": "570.124.06"}, "cuda": {"toolkits": [{"version": "12.8"}]}}


def facts(**kw):
    return Facts(**kw)


# rule id -> (overlay that fires it, overlay that does not, optional observed facts for each)
CASES: dict[str, tuple] = {
    "driver-too-old-for-cuda": ({"driver": {"version": "570.124.06"}},
                                {"driver": {"version": ">=580"}}),
    "driver-too-old-for-torch-cuda": (
        {"driver": {"version": "575.51.03"}, "cuda": {"toolkits": [{"version": "12.8"}]}},
        {"driver": {"version": "580.65.06"}, "cuda": {"toolkits": [{"version": "12.8"}]}}),
    "driver-below-full-128": (
        {"driver": {"version": "560.35.03"}, "cuda": {"toolkits": [{"version": "12.8"}]},
         "python": {"torch_cuda": "cu128", "packages": {"torch": "2.9.1"}}},
        {"driver": {"version": "570.124.06"}, "cuda": {"toolkits": [{"version": "12.8"}]}}),
    "forward-compat-geforce": (
        {"driver": {"forward_compat": True}, "hardware": {"gpu": {"segment": "geforce"}}},
        {"driver": {"forward_compat": True}, "hardware": {"gpu": {"segment": "datacenter"}}}),
    "forward-compat-workstation": ({"driver": {"forward_compat": True}},
                                   {"driver": {"forward_compat": True}, "hardware": {"gpu": {"segment": "datacenter"}}}),
    "nvml-driver-mismatch": ({}, {}, facts(nvml_error="Failed to initialize NVML: Driver/library version mismatch"),
                             facts(driver_version="580.95.05")),
    "arch-needs-newer-toolkit": ({"cuda": {"toolkits": [{"version": "12.6"}]}, "driver": {"version": "560.35.03"},
                                  "python": {"torch_cuda": "cu126", "packages": {"torch": "2.9.1"}}},
                                 {"cuda": {"toolkits": [{"version": "12.8"}]}}),
    "arch-dropped-by-toolkit": ({"hardware": {"gpu": {"arch": "sm_70", "segment": "datacenter"}}},
                                {"hardware": {"gpu": {"arch": "sm_75", "segment": "datacenter"}}}),
    "arch-renamed-sm110": ({"hardware": {"gpu": {"arch": "sm_101", "segment": "embedded"}}},
                           {"hardware": {"gpu": {"arch": "sm_110", "segment": "embedded"}}}),
    "arch-family-target-needs-129": ({"hardware": {"gpu": {"arch": "sm_120f"}},
                                      "cuda": {"toolkits": [{"version": "12.8"}]}},
                                     {"hardware": {"gpu": {"arch": "sm_120f"}}}),
    "blackwell-needs-open-modules": ({"driver": {"kernel_modules": "proprietary"}},
                                     deep_merge(SM90, {"driver": {"kernel_modules": "proprietary"}})),
    "blackwell-host-runs-proprietary-modules": ({}, {}, facts(kernel_module="proprietary"),
                                                facts(kernel_module="open")),
    "torch-symm-mem-needs-multicast": (deep_merge(SM90, cfg({"--enable-torch-symm-mem": True})),
                                       deep_merge(deep_merge(SM90, {"hardware": {"interconnect": "nvlink"}}),
                                                  cfg({"--enable-torch-symm-mem": True}))),
    "nccl-pin-differs-from-torch": ({"python": {"packages": {"nvidia-nccl-cu13": "2.27.5"}}},
                                    {"python": {"packages": {"nvidia-nccl-cu13": "2.28.9"}}}),
    "nccl-before-native-blackwell": (
        {"python": {"packages": {"nvidia-nccl-cu12": "2.21.5", "torch": "2.10.0"}, "torch_cuda": "cu126"}},
        deep_merge(SM90, {"python": {"packages": {"nvidia-nccl-cu12": "2.21.5", "torch": "2.10.0"},
                                     "torch_cuda": "cu126"}})),
    "cutlass-moe-fp8-block-sm12x": (deep_merge({"benchmarks": {"model_path": "/models/Qwen3-235B-FP8"}},
                                               cfg({"--moe-runner-backend": "flashinfer_cutlass"})),
                                    deep_merge({"benchmarks": {"model_path": "/models/Qwen3-235B-FP8"}},
                                               cfg({"--moe-runner-backend": "triton"}))),
    "b12x-moe-rejects-ep": (cfg({"--moe-runner-backend": "flashinfer_b12x", "--ep-size": 8}),
                            cfg({"--moe-runner-backend": "flashinfer_b12x"})),
    # the PyPI wheel's common_ops links libcudart.so.13 (0.4.4) or .so.12 (0.4.1): kernel_releases.yaml
    "kernel-cuda-build-mismatch": ({"python": {"torch_cuda": "cu128"}},
                                   {"python": {"torch_cuda": "cu128", "packages": {"sglang-kernel": "0.4.4+cu128"}}}),
    "kernel-cuda-build-unknown": ({"python": {"packages": {"sglang-kernel": "0.4.99"}}}, {}),
    "torch-symm-mem-torch-too-old": (
        deep_merge({"python": {"packages": {"torch": "2.5.1"}}}, cfg({"--enable-torch-symm-mem": True})),
        cfg({"--enable-torch-symm-mem": True})),
    "observed-arch-differs": ({}, {}, facts(gpus=[GpuFact(index=0, name="NVIDIA H200", compute_capability="9.0")]),
                              facts(gpus=[GpuFact(index=0, name="RTX PRO 6000", compute_capability="12.0")])),
    "pip-toolkit-12-has-no-nvcc": ({"cuda": {"toolkits": [{"version": "12.8", "source": "pip"}]}},
                                   {"cuda": {"toolkits": [{"version": "13.0", "source": "pip"}]}}),
    "cu13-wheel-suffix": ({"python": {"packages": {"nvidia-cuda-runtime-cu13": "13.0.96"}}},
                          {"python": {"packages": {"nvidia-cuda-runtime": "13.0.96"}}}),
    "nccl-cu12-and-cu13": ({"python": {"packages": {"nvidia-nccl-cu12": "2.27.3", "nvidia-nccl-cu13": "2.28.3"}}},
                           {"python": {"packages": {"nvidia-nccl-cu13": "2.28.3"}}}),
    "torch-too-old-for-sm12x": ({"python": {"torch_cuda": "cu126", "packages": {"torch": "2.6.0"}}},
                                {"python": {"packages": {"torch": "2.11.0"}}}),
    "torch-build-missing": ({"python": {"torch_cuda": "cu128", "packages": {"torch": "2.13.0"}}},
                            {"python": {"torch_cuda": "cu130", "packages": {"torch": "2.13.0"}}}),
    "torch-build-experimental": ({"python": {"torch_cuda": "cu130", "packages": {"torch": "2.9.1"}}},
                                 {"python": {"torch_cuda": "cu128", "packages": {"torch": "2.9.1"}}}),
    "torch-cuda-lacks-arch": ({"python": {"torch_cuda": "cu126"}},
                              {"python": {"torch_cuda": "cu128"}}),
    "flashinfer-needs-sm75": ({"hardware": {"gpu": {"arch": "sm_70", "segment": "datacenter"}},
                               "cuda": {"toolkits": [{"version": "12.8"}]}},
                              {"hardware": {"gpu": {"arch": "sm_75", "segment": "datacenter"}}}),
    "flashinfer-too-old-for-sm12x": ({"python": {"packages": {"flashinfer-python": "0.2.14", "flashinfer-cubin": None}}},
                                     {"python": {"packages": {"flashinfer-python": "0.3.1", "flashinfer-cubin": None}}}),
    "flashinfer-sm12x-cuda-min": (
        {"cuda": {"toolkits": [{"version": "12.8"}]}, "driver": {"version": "570.124.06"},
         "python": {"torch_cuda": "cu128"}},
        {"cuda": {"toolkits": [{"version": "12.9"}]}, "driver": {"version": "575.51.03"},
         "python": {"torch_cuda": "cu128"}}),
    "flashinfer-sm12x-needs-cuda128": (
        {**OLD_SGLANG, "cuda": {"toolkits": [{"version": "12.6"}, {"version": "12.8"}], "select": "12.6"}},
        OLD_SGLANG),
    "flashinfer-jit-nvcc-major": ({"cuda": {"toolkits": [{"version": "12.9"}]}},
                                  {"cuda": {"toolkits": [{"version": "13.0"}]}}),
    "flashinfer-arch-list-ignored": (
        {"env": {"FLASHINFER_CUDA_ARCH_LIST": "12.0a"}, "python": {"packages": {"flashinfer-python": "0.2.14", "flashinfer-cubin": None}}},
        {"env": {"FLASHINFER_CUDA_ARCH_LIST": "12.0a"}}),
    "flashinfer-cubin-version": ({"python": {"packages": {"flashinfer-cubin": "0.6.11"}}},
                                 {"python": {"packages": {"flashinfer-cubin": "0.6.12"}}}),
    "flashinfer-jit-cache-cuda": ({"python": {"packages": {"flashinfer-jit-cache": "0.6.12+cu129"}}},
                                  {"python": {"packages": {"flashinfer-jit-cache": "0.6.12+cu130"}}}),
    "sglang-pins-unknown": ({"python": {"packages": {"sglang": "0.5.99"}}},
                            {"python": {"packages": {"sglang": "0.5.15"}}}),
    "sglang-torch-pin": ({"python": {"packages": {"torch": "2.10.0"}}},
                         {"python": {"packages": {"torch": "2.11.0"}}}),
    "sglang-flashinfer-pin": ({"python": {"packages": {"flashinfer-python": "0.6.11", "flashinfer-cubin": "0.6.11"}}},
                              {"python": {"packages": {"flashinfer-python": "0.6.12"}}}),
    "sglang-kernel-pin": ({"python": {"packages": {"sglang-kernel": "0.4.2.post2"}}},
                          {"python": {"packages": {"sglang-kernel": "0.4.4"}}}),
    "sglang-kernel-package-name": ({"python": {"packages": {"sglang-kernel": None, "sgl-kernel": "0.4.4"}}},
                                   {"python": {"packages": {"sglang-kernel": "0.4.4"}}}),
    "package-not-pinned": ({"python": {"packages": {"torch": ">=2.11,<2.12"}}},
                           {"python": {"packages": {"torch": "2.11.0", "numpy": ">=1.26"}}}),
    "torch-symm-mem-keyerror": (deep_merge(OLD_SGLANG, cfg({"--enable-torch-symm-mem": True})),
                                deep_merge(OLD_SGLANG, cfg({"--enable-torch-symm-mem": False}))),
    "torch-symm-mem-unsupported-arch": (cfg({"--enable-torch-symm-mem": True}),
                                        deep_merge(SM90, cfg({"--enable-torch-symm-mem": True}))),
    # the wheels' table: 2, 4, 6, 8 on SM90 (FACTS.md had 4, 6, 8: the multimem subset)
    "torch-symm-mem-world-size": (deep_merge(SM90, cfg({"--enable-torch-symm-mem": True, "--tp-size": 3})),
                                  deep_merge(SM90, cfg({"--enable-torch-symm-mem": True, "--tp-size": 2}))),
    "torch-symm-mem-needs-p2p": (cfg({"--enable-torch-symm-mem": True}),
                                 deep_merge({"hardware": {"interconnect": "nvlink"}},
                                            cfg({"--enable-torch-symm-mem": True}))),
    # sglang 0.5.9-0.5.13: the communicator applies fusion on SM90/SM100 only, so on SM12x the
    # flag does nothing (issue 26: it was an error, from flashinfer's JIT gate sglang never reaches)
    "allreduce-fusion-sglang-skips": (deep_merge(OLD_SGLANG, cfg({"--enable-flashinfer-allreduce-fusion": True})),
                                      deep_merge(OLD_SGLANG, deep_merge(
                                          SM90, cfg({"--enable-flashinfer-allreduce-fusion": True})))),
    # sglang 0.5.15 refuses SM12x itself, whatever flashinfer offers, for the old flag and the backend flag
    "allreduce-fusion-sglang-gate": (cfg({"--flashinfer-allreduce-fusion-backend": "trtllm"}),
                                     deep_merge(SM90, cfg({"--enable-flashinfer-allreduce-fusion": True}))),
    "a2a-flashinfer-needs-cutlass-runner": (
        cfg({"--moe-a2a-backend": "flashinfer", "--enable-dp-attention": True, "--dp-size": 8}),
        cfg({"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass",
             "--enable-dp-attention": True, "--dp-size": 8})),
    "a2a-flashinfer-needs-dp-attention": (
        cfg({"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass"}),
        cfg({"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass",
             "--enable-dp-attention": True, "--dp-size": 8})),
    # 0.5.22 asserts attn_dp_size == tp_size: --attn-dp-size, or the deprecated pair it becomes
    "a2a-flashinfer-needs-attn-dp-size": (
        deep_merge({"python": {"packages": {"sglang": "0.5.22"}}},
                   cfg({"--moe-a2a-backend": "flashinfer", "--attn-dp-size": 4})),
        deep_merge({"python": {"packages": {"sglang": "0.5.22"}}},
                   cfg({"--moe-a2a-backend": "flashinfer", "--enable-dp-attention": True, "--dp-size": 8}))),
    "a2a-flashinfer-ep-size": (cfg({"--moe-a2a-backend": "flashinfer"}), cfg({"--moe-a2a-backend": "deepep"})),
    "a2a-flashinfer-expert-location-assert": (
        deep_merge(OLD_SGLANG, cfg({"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass"})),
        cfg({"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass"})),
    "custom-allreduce-pcie": (cfg({"--disable-custom-all-reduce": None}),
                              deep_merge({"hardware": {"gpu": {"count": 2}}},
                                         cfg({"--disable-custom-all-reduce": None}))),
    "nccl-algo-unknown": (cfg(env={"NCCL_ALGO": "Trees"}), cfg(env={"NCCL_ALGO": "allreduce:tree;^nvls"})),
    "nccl-proto-unknown": (cfg(env={"NCCL_PROTO": "LL256"}), cfg(env={"NCCL_PROTO": "^LL128"})),
    "nccl-p2p-level-unknown": (cfg(env={"NCCL_P2P_LEVEL": "NVLINK"}), cfg(env={"NCCL_P2P_LEVEL": "NVL"})),
    "nccl-algo-tree-global": (cfg(env={"NCCL_ALGO": "Tree"}), cfg(env={"NCCL_ALGO": "allreduce:tree"})),
    "nccl-p2p-rtx-pcie": ({"env": {"NCCL_P2P_DISABLE": None}},
                          {"env": {"NCCL_P2P_DISABLE": None}, "hardware": {"gpu": {"segment": "datacenter"}}}),
    "speculative-draft-missing": (cfg({"--speculative-algorithm": "EAGLE3"}),
                                  cfg({"--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "/d"})),
    "allreduce-fusion-unavailable": ({}, SM90),
    "symm-mem-needs-sm80": ({"hardware": {"gpu": {"arch": "sm_75", "segment": "datacenter"}}},
                            {"hardware": {"gpu": {"arch": "sm_80", "segment": "datacenter"}}}),
    "bench-dataset-downloads": ({"benchmarks": {"load": {"dataset": "random"}}},
                                {"benchmarks": {"load": {"dataset": "random", "dataset_path": "/data/sharegpt.json"}}}),
    # --tp-size 2 on one H200 died with `CUDA error: invalid device ordinal` (sglang 0.5.11)
    "parallel-exceeds-gpus": (cfg({"--tp-size": 16}),
                              cfg({"--tp-size": 4, "--pp-size": 2})),
    "ep-must-divide-tp": (cfg({"--ep-size": 3}), cfg({"--ep-size": 8})),
    # a free port from the OS (60311) killed a real 0.5.11 server: SGLANG_GRPC_PORT (70311)
    "port-leaves-no-grpc-port": (cfg({"--port": 60311}), cfg({"--port": 60311}, {"SGLANG_GRPC_PORT": "40000"})),
    "trtllm-gen-not-on-sm12x": (cfg({"--attention-backend": "trtllm_mla"}),
                                deep_merge({"hardware": {"gpu": {"arch": "sm_100", "segment": "datacenter"}}},
                                           cfg({"--attention-backend": "trtllm_mla"}))),
    "mxfp4-moe-runner-sm12x": (cfg({"--moe-runner-backend": "flashinfer_mxfp4"}), cfg({"--moe-runner-backend": "triton"})),
    "cutlass-moe-quantized-sm12x": (
        deep_merge({"benchmarks": {"model_path": "/models/Kimi-K2.5-INT4"}}, cfg({"--moe-runner-backend": "flashinfer_cutlass"})),
        deep_merge({"benchmarks": {"model_path": "/models/Kimi-K2.5-INT4"}}, cfg({"--moe-runner-backend": "triton"}))),
    # a release the wheel data lacks (0.3.7); for those it has, kernel-cuda-build-mismatch says it
    "sgl-kernel-pypi-is-cu12": (
        {"python": {"packages": {"sglang-kernel": None, "sgl-kernel": "0.3.7"}}},
        {"python": {"packages": {"sglang-kernel": None, "sgl-kernel": "0.3.21"}}}),
    "jit-cuda-home-unset": ({"env": {"CUDA_HOME": None}}, {}),
    # the tiny Qwen3-MoE of the GPU tests has 8 experts (tests/fixtures/models)
    "ep-must-divide-experts": (deep_merge(TINY_MOE, cfg({"--ep-size": 3, "--tp-size": 3})),
                               deep_merge(TINY_MOE, cfg({"--ep-size": 4, "--tp-size": 4}))),
    # 4 attention heads, 2 KV heads: tp 3 splits neither; tp 4 splits the heads and replicates the KV heads
    "tp-must-divide-heads": (deep_merge(TINY_MOE, cfg({"--tp-size": 3})),
                             deep_merge(TINY_MOE, {"benchmarks": {"server_flags": {"--tp-size": 4}}})),
    # sglang 0.5.15 needs cuda-python >= 13: PyPI's default torch is the cu130 build
    "pypi-torch-is-cuda13": ({"driver": {"version": "570.124.06"}, "cuda": {"toolkits": [{"version": "12.8"}]},
                              "python": {"torch_cuda": None}},
                             {"driver": {"version": "570.124.06"}, "cuda": {"toolkits": [{"version": "12.8"}]},
                              "python": {"torch_cuda": "cu128"}}),
    # asked of the environment (the bench): what it can import decides
    "feature-package-missing": (cfg({"--moe-a2a-backend": "deepep"}), cfg({"--moe-a2a-backend": "deepep"}),
                                frozenset({"flashinfer"}), frozenset({"deep_ep", "flashinfer"})),
    # read from the spec: a package python.packages does not list
    "feature-package-not-in-spec": (cfg({"--moe-a2a-backend": "deepep"}),
                                    deep_merge({"python": {"packages": {"deep-ep": "1.2.1"}}},
                                               cfg({"--moe-a2a-backend": "deepep"}))),
}


def fired(overlay: dict, observed: Facts | frozenset[str] | None = None) -> set[str]:
    """Rules that fire; ``observed`` is facts, or the modules the environment can import."""
    spec = Spec.model_validate(deep_merge(CLEAN, overlay))
    if isinstance(observed, frozenset):
        return {f.id for f in evaluate(spec, installed_modules=observed)}
    return {f.id for f in evaluate(spec, observed)}


def test_forward_compat_does_not_silence_the_driver_check_where_it_cannot_work():
    old_driver = {"driver": {"version": "570.124.06", "forward_compat": True}}
    assert "driver-too-old-for-cuda" in fired(old_driver)  # a workstation GPU: error 804
    datacenter = deep_merge(old_driver, {"hardware": {"gpu": {"segment": "datacenter"}}})
    assert "driver-too-old-for-cuda" not in fired(datacenter)  # cuda-compat stands in there


def test_experts_unknown_without_a_readable_config_and_read_from_deepseek_keys(tmp_path):
    # no config.json here (the model lives on another host): unknown, quiet
    assert "ep-must-divide-experts" not in fired(cfg({"--ep-size": 3, "--tp-size": 3}))
    (tmp_path / "config.json").write_text('{"architectures": ["DeepseekV3ForCausalLM"], "n_routed_experts": 384}')
    model = {"benchmarks": {"model_path": str(tmp_path)}}
    assert "ep-must-divide-experts" in fired(deep_merge(model, cfg({"--ep-size": 5, "--tp-size": 5})))
    assert "ep-must-divide-experts" not in fired(deep_merge(model, cfg({"--ep-size": 8})))


def test_heads_split_over_the_attention_tp_ranks_and_kv_heads_may_be_replicated(tmp_path):
    from envmgr.compat.context import tp_divides_heads

    assert tp_divides_heads(32, 8, 8) and tp_divides_heads(32, 4, 8)  # 4 KV heads on 8 ranks: replicated
    assert tp_divides_heads(32, 8, 3) is False and tp_divides_heads(32, 3, 4) is False
    assert tp_divides_heads(None, None, 8) is None and tp_divides_heads(5, 5, 1) is None
    # with --enable-dp-attention the attention TP is tp / dp: 8 / 8 = 1, nothing to split
    def heads_findings(flags):
        spec = Spec.model_validate(deep_merge(CLEAN, deep_merge(TINY_MOE, cfg(flags))))
        return [f for f in evaluate(spec) if f.id == "tp-must-divide-heads" and "x" in f.configs]

    assert heads_findings({"--tp-size": 8, "--dp-size": 8, "--enable-dp-attention": True}) == []
    assert heads_findings({"--tp-size": 8})  # 4 heads over 8 ranks
    [finding] = heads_findings({"--tp-size": 3})
    assert "4 attention heads and 2 KV heads" in finding.message and "over 3 ranks" in finding.message


def test_dp_attention_shares_the_tp_gpus_and_plain_dp_replicates_them():
    shared = cfg({"--tp-size": 8, "--dp-size": 8, "--enable-dp-attention": True})
    replicated = cfg({"--tp-size": 8, "--dp-size": 2})
    assert "parallel-exceeds-gpus" not in fired(shared)
    assert "parallel-exceeds-gpus" in fired(replicated)


def test_the_real_tp2_on_one_gpu_config_is_an_error_at_its_line():
    one_gpu = deep_merge({"hardware": {"gpu": {"count": 1}}}, cfg({"--tp-size": 2}))
    [finding] = [f for f in evaluate(Spec.model_validate(deep_merge(CLEAN, one_gpu)))
                 if f.id == "parallel-exceeds-gpus" and "x" in f.configs]
    assert finding.severity == "error" and finding.configs == ("x",)
    assert "tp 2 x pp 1 = 2 GPUs" in finding.message and "has 1" in finding.message


# Facts about what a clean SM120 stack cannot do (notes that predict probe outcomes).
CAPABILITY_NOTES = {"allreduce-fusion-unavailable"}


def test_clean_stack_has_no_findings():
    assert fired({}) == CAPABILITY_NOTES


def test_every_rule_has_cases():
    ids = {r.id for r in default_knowledge_base().rules}
    assert ids == set(CASES), f"rules without cases: {ids - set(CASES)}; stale cases: {set(CASES) - ids}"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(rule_id):
    case = CASES[rule_id]
    assert rule_id in fired(case[0], case[2] if len(case) > 2 else None)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_stays_quiet(rule_id):
    case = CASES[rule_id]
    assert rule_id not in fired(case[1], case[3] if len(case) > 3 else None)


def test_rules_read_only_facts_the_context_produces():
    known = STACK_FACTS | CONFIG_FACTS
    for rule in default_knowledge_base().rules:
        for name in rule.facts():
            assert name in known or name.startswith(DYNAMIC_PREFIXES), (rule.id, name)


def test_predictions_name_known_probes():
    from envmgr.probes.runner import PROBES

    for rule in default_knowledge_base().rules:
        assert set(rule.predicts) <= set(PROBES), rule.id


def test_findings_carry_fix_and_source():
    spec = Spec.model_validate(deep_merge(CLEAN, {"driver": {"version": "570.124.06"}}))
    (finding,) = [f for f in evaluate(spec) if f.id == "driver-too-old-for-cuda"]
    assert finding.severity == "error"
    assert "CUDA 13.0 needs driver >= 580" in finding.message
    assert "580.95.05" in finding.fix  # the driver bundled with CUDA 13.0
    assert any("CUDA Compatibility" in source for source in finding.sources)
    assert finding.field == "driver"


def test_observed_nvcc_overrides_the_spec_toolkit():
    """FlashInfer's JIT uses the nvcc it finds: an observed 12.8 nvcc under torch cu130 warns."""
    nvcc = CompilerFact(path="/usr/local/cuda-12.8/bin/nvcc", kind="nvcc", version="12.8.93",
                        release="12.8", origin="CUDA_HOME")
    assert "flashinfer-jit-nvcc-major" in fired({}, Facts(compilers=[nvcc]))
    assert "flashinfer-sm12x-cuda-min" in fired({}, Facts(compilers=[nvcc]))


def test_observed_driver_used_when_spec_leaves_driver():
    observed = Facts(driver_version="570.124.06")
    assert "driver-too-old-for-cuda" in fired({"driver": None}, observed)
    assert "driver-too-old-for-cuda" not in fired({"driver": None})


# Flag names, kinds and choices per sglang release come from envmgr/compat/sglang_flags.yaml
# (tests/unit/test_bench_flags.py); validate reports them like rules, per config.
FLAG_CASES = {
    "flag-bad-choice": (cfg({"--moe-a2a-backend": "flashinfer_a2a"}), cfg({"--moe-a2a-backend": "deepep"})),
    "flag-unknown": (cfg({"--moe-runner-backnd": "triton"}), cfg({"--moe-runner-backend": "triton"})),
}


@pytest.mark.parametrize("flag_id", sorted(FLAG_CASES))
def test_flag_checks_are_findings_of_validate(flag_id):
    bad, good = FLAG_CASES[flag_id]
    assert flag_id in fired(bad)
    assert flag_id not in fired(good)


def test_common_flag_reported_once_for_all_configs():
    overlay = {"benchmarks": {"server_flags": {"--cuda-graph-max-bs": 128},
                              "configs": {"a": {}, "b": {}}}}
    spec = Spec.model_validate(deep_merge(CLEAN, overlay))
    hits = [f for f in evaluate(spec) if f.id == "flag-deprecated"]
    assert len(hits) == 1
    assert hits[0].configs == ("baseline", "a", "b")
    assert hits[0].field == "benchmarks.server_flags.--cuda-graph-max-bs"


# --- release boundaries: the rules agree with what the wheels say (sglang_releases.yaml) --------

RELEASES = default_knowledge_base().tables["sglang_releases"]


def at_release(version: str, flags: dict) -> set[str]:
    return fired(deep_merge({"python": {"packages": {"sglang": version}}}, cfg(flags)))


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_symm_mem_keyerror_fires_exactly_where_the_wheel_indexes_the_table(version):
    keyerror = RELEASES[version]["symm_mem_other_major"] == "KeyError"
    rules = at_release(version, {"--enable-torch-symm-mem": True})  # on SM120
    assert ("torch-symm-mem-keyerror" in rules) is keyerror
    assert ("torch-symm-mem-unsupported-arch" in rules) is (not keyerror)


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_a2a_rules_follow_each_releases_asserts(version):
    a2a = RELEASES[version]["a2a_flashinfer"] or {}
    rules = at_release(version, {"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutedsl"})
    runners = a2a.get("runner_backends")
    assert ("a2a-flashinfer-needs-cutlass-runner" in rules) is (runners is not None and "flashinfer_cutedsl" not in runners)
    needs = bool(a2a.get("needs_dp_attention"))
    new_flag = a2a.get("dp_flag") == "--attn-dp-size"
    assert ("a2a-flashinfer-needs-dp-attention" in rules) is (needs and not new_flag)
    assert ("a2a-flashinfer-needs-attn-dp-size" in rules) is (needs and new_flag)
    if needs:  # the flags each rule's edit adds clear it in that release
        edit = {"--attn-dp-size": 8} if new_flag else {"--enable-dp-attention": True, "--dp-size": 8}
        cleared = at_release(version, {"--moe-a2a-backend": "flashinfer",
                                       "--moe-runner-backend": "flashinfer_cutedsl", **edit})
        assert not {"a2a-flashinfer-needs-dp-attention", "a2a-flashinfer-needs-attn-dp-size"} & cleared


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_fusion_on_sm120_is_refused_by_every_release_that_has_the_gate(version):
    refuses = RELEASES[version]["fusion_refuses_other"] is True
    rules = at_release(version, {"--enable-flashinfer-allreduce-fusion": True})
    assert ("allreduce-fusion-sglang-gate" in rules) is refuses
    assert ("allreduce-fusion-sglang-skips" in rules) is (RELEASES[version]["fusion_refuses_other"] is False)
    if Version(version) >= Version("0.5.14"):  # the flag that replaced it reaches the same gate (every backend)
        for backend in ("auto", "trtllm", "mnnvl"):
            assert "allreduce-fusion-sglang-gate" in at_release(version, {"--flashinfer-allreduce-fusion-backend": backend})


def test_corrected_facts_at_their_real_boundaries():
    """FACTS.md's corrections, from the wheels: KeyError fixed in 0.5.14 (not 0.5.15); FlashInfer
    A2A needs dp-attention from 0.5.13 (not 0.5.15) and accepts flashinfer_cutedsl from 0.5.13."""
    symm = {"--enable-torch-symm-mem": True}
    assert "torch-symm-mem-keyerror" in at_release("0.5.13", symm)
    assert "torch-symm-mem-keyerror" not in at_release("0.5.14", symm)
    a2a = {"--moe-a2a-backend": "flashinfer", "--moe-runner-backend": "flashinfer_cutlass"}
    assert "a2a-flashinfer-needs-dp-attention" not in at_release("0.5.12", a2a)
    assert "a2a-flashinfer-needs-dp-attention" in at_release("0.5.13", a2a)
    cutedsl = {**a2a, "--moe-runner-backend": "flashinfer_cutedsl", "--enable-dp-attention": True, "--dp-size": 8}
    assert "a2a-flashinfer-needs-cutlass-runner" in at_release("0.5.12", cutedsl)
    assert "a2a-flashinfer-needs-cutlass-runner" not in at_release("0.5.13", cutedsl)
    # and still from 0.5.22, where the assert reads --attn-dp-size (an earlier extraction missed it)
    assert "a2a-flashinfer-needs-attn-dp-size" in at_release("0.5.22", a2a)
    assert "a2a-flashinfer-needs-attn-dp-size" not in at_release("0.5.21", a2a)
    # fusion on SM120: refused by sglang itself from 0.5.14 through the newest release read
    fusion = {"--enable-flashinfer-allreduce-fusion": True}
    newest = max(RELEASES, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert "allreduce-fusion-sglang-gate" in at_release(newest, fusion)
    assert "allreduce-fusion-sglang-gate" not in at_release("0.5.13", fusion)
    # and before, the flag is accepted and does nothing there: a warning that the feature is off
    assert "allreduce-fusion-sglang-skips" in at_release("0.5.13", fusion)
    assert "allreduce-fusion-sglang-skips" not in at_release("0.5.14", fusion)


KERNELS = default_knowledge_base().tables["kernel_releases"]


@pytest.mark.parametrize("package, version", [(p, v) for p in sorted(KERNELS) for v in sorted(KERNELS[p])])
@pytest.mark.parametrize("torch_cuda", ["cu128", "cu130"])
def test_a_kernel_wheel_loads_only_beside_torch_of_its_cuda_major(package, version, torch_cuda):
    # issue 26: sglang-kernel 0.4.1 is a CUDA 12 build (cu130 torch cannot load it); 0.4.2 ... 0.4.10
    # are CUDA 13 builds (cu12x torch cannot); read per release from the wheels, not a literal
    other = "sgl-kernel" if package == "sglang-kernel" else "sglang-kernel"
    rules = fired({"python": {"torch_cuda": torch_cuda, "packages": {package: version, other: None}}})
    expected = KERNELS[package][version]["cuda_major"] != int(torch_cuda[2:4])
    assert ("kernel-cuda-build-mismatch" in rules) is expected, (package, version, torch_cuda)
    assert "kernel-cuda-build-unknown" not in rules


def test_the_kernel_builds_the_issue_read_from_the_wheels():
    assert KERNELS["sglang-kernel"]["0.4.1"]["cuda_major"] == 12
    for version in ("0.4.2", "0.4.2.post2", "0.4.3", "0.4.4", "0.4.5", "0.4.6.post1", "0.4.7", "0.4.9", "0.4.10"):
        assert KERNELS["sglang-kernel"][version]["cuda_major"] == 13
        assert "libcudart.so.13" in KERNELS["sglang-kernel"][version]["libraries"]
    assert KERNELS["sgl-kernel"]["0.3.21"]["cuda_major"] == 12  # the cuda128 stack's


def test_a2a_runner_backends_of_0_5_19_and_later_are_read_from_their_wheels():
    # issue 26: the extractor missed "FlashInfer MoE A2A" (0.5.19+ spelling), so triton passed
    dp = {"--moe-a2a-backend": "flashinfer", "--enable-dp-attention": True, "--dp-size": 8}
    for version in ("0.5.19", "0.5.20", "0.5.21"):
        assert "a2a-flashinfer-needs-cutlass-runner" in at_release(version, {**dp, "--moe-runner-backend": "triton"})
        for runner in ("flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "flashinfer_trtllm_routed",
                       "deep_gemm"):
            assert "a2a-flashinfer-needs-cutlass-runner" not in at_release(version, {**dp, "--moe-runner-backend": runner})


FLASHINFER = default_knowledge_base().tables["flashinfer_releases"]


@pytest.mark.parametrize("version", sorted(FLASHINFER))
def test_fusion_availability_follows_each_flashinfer_wheels_jit_gate(version):
    majors = FLASHINFER[version]["jit_majors"]["gen_trtllm_comm_module"]
    rules = fired({"python": {"packages": {"flashinfer-python": version, "flashinfer-cubin": version}}})
    assert ("allreduce-fusion-unavailable" in rules) is (12 not in majors)  # CLEAN is SM120


@pytest.mark.parametrize("version", sorted(FLASHINFER))
@pytest.mark.parametrize(("arch", "minor"), [("sm_120", 0), ("sm_121", 1)])
def test_the_sm12x_toolkit_check_follows_each_flashinfer_wheel(version, arch, minor):
    """compilation_context.py's own check, read per release: CUDA 12.8 fails where the wheel asks
    for more for this SM 12 minor, and a release without the check is nvcc's to refuse (< 12.8)."""
    needed = (FLASHINFER[version].get("sm12_cuda_min") or {}).get(minor)
    stack = {"hardware": {"gpu": {"arch": arch}}, "cuda": {"toolkits": [{"version": "12.8"}]},
             "driver": {"version": "570.124.06"},
             "python": {"torch_cuda": "cu128", "packages": {"flashinfer-python": version, "flashinfer-cubin": version}}}
    rules = fired(stack)
    assert ("flashinfer-sm12x-cuda-min" in rules) is (needed is not None and Version(needed) > Version("12.8"))
    assert "flashinfer-sm12x-needs-cuda128" not in rules  # 12.8 knows compute_120a


def test_flashinfer_0_7_1_and_later_build_sm120_on_cuda_12_8_but_not_sm121():
    """Read from the wheels (0.7.1 on): `SM 120 requires CUDA >= 12.8`, `SM 12.1+ requires CUDA >= 12.9`."""
    assert FLASHINFER["0.7.1"]["sm12_cuda_min"] == FLASHINFER["0.7.4"]["sm12_cuda_min"] == {0: "12.8", 1: "12.9"}
    assert FLASHINFER["0.7.0"]["sm12_cuda_min"] == {0: "12.9", 1: "12.9"}
    assert FLASHINFER["0.6.7"]["sm12_cuda_min"] == {0: "12.9", 1: "12.9"}
    assert FLASHINFER["0.6.6"]["sm12_cuda_min"] is None
