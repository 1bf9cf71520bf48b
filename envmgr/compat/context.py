"""Turn a spec (and, optionally, observed facts) into the flat facts rules read.

A fact is ``None`` when it is unknown (a package pinned by a range, no observation):
rules never treat unknown as bad. Every name produced here is listed in
``STACK_FACTS`` / ``CONFIG_FACTS`` so the rule data can be checked against it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from envmgr.compat.flags import setting
from envmgr.compat.kb import KERNEL_PACKAGES
from envmgr.model_config import int_field, model_config
from envmgr.spec.models import MAX_FLAG_NUMBER, Spec, canonical_name
from envmgr.versions import exact_pin, local_cuda_tag, lowest_version, major

if TYPE_CHECKING:  # facts pull in their collectors; validate needs only the type
    from envmgr.facts.model import Facts

Context = dict[str, Any]

# Packages whose exact versions the rules reason about.
STACK_PACKAGES = ("torch", "flashinfer-python", "flashinfer-cubin", "sglang", *KERNEL_PACKAGES)

STACK_FACTS = frozenset({
    "arch", "arch_base", "arch_suffix", "arch_num", "arch_major", "arch_toolkit",
    "gpu_count", "gpu_model", "segment", "interconnect",
    "driver", "forward_compat", "driver_kernel_modules", "cuda", "cuda_major", "cuda_source", "cuda_driver_min",
    "cuda_bundled_driver", "torch", "torch_minor", "torch_cuda", "torch_cuda_version",
    "torch_cuda_major", "torch_driver_min", "torch_tags", "torch_stable_tags",
    "torch_cuda_status", "flashinfer", "flashinfer_cubin", "flashinfer_jit_cache_tag",
    "sglang", "sglang_pins_known", "sglang_pin_torch", "sglang_pin_flashinfer",
    "sglang_pin_kernel", "sglang_pin_kernel_package", "sglang_kernel",
    "sglang_kernel_package", "unpinned_stack_packages", "jit_nvcc", "jit_nvcc_major",
    "symm_mem_world_sizes", "observed_arch", "observed_gpu", "nvml_error", "observed_kernel_module",
    "sglang_gates_known", "sglang_symm_mem_majors", "sglang_symm_mem_other_major",
    "sglang_fusion_majors", "sglang_fusion_refuses_other", "sglang_a2a_runner_backends",
    "sglang_a2a_needs_dp_attention", "sglang_a2a_dp_flag", "sglang_grpc_port_check", "sglang_cuda_python_min_major",
    "sglang_kernel_cuda_tag", "sglang_kernel_cuda_major", "sglang_kernel_cuda_libraries", "model_path", "model_num_experts", "model_num_attention_heads",
    "model_num_kv_heads", "flashinfer_fusion_majors", "flashinfer_sm12_cuda_min",
    "flashinfer_gates_release", "torch_nccl", "nccl_pin", "nccl_package",
    "load_dataset", "load_dataset_path",
})
CONFIG_FACTS = frozenset({"config", "world_size", "dp_size", "attn_dp_size", "tp_size", "pp_size", "ep_size",
                          "gpus_needed", "parallel_layout", "ep_divides_tp", "missing_feature_modules",
                          "unlisted_feature_modules", "moe_runner_backend", "attention_backends",
                          "ep_divides_experts", "attn_tp_size", "tp_divides_heads"})
# Also produced: "pkg:<name>" per package, "env:<NAME>" per variable, and per config
# "--<flag>" plus "flag_<flag_with_underscores>" (for message templates).
DYNAMIC_PREFIXES = ("pkg:", "env:", "--", "flag_")


def stack_context(spec: Spec, facts: Facts | None, tables: dict[str, dict]) -> Context:
    """Facts about the whole stack, the ones ``scope: stack`` rules read."""
    ctx: Context = dict.fromkeys(STACK_FACTS)
    ctx.update(_hardware(spec, tables))
    ctx.update(_cuda(spec, facts, tables))
    ctx.update(_packages(spec, tables, ctx["arch_num"]))
    if ctx["sglang"]:
        ctx.update(_sglang_gates(tables["sglang_releases"], ctx["sglang"], ctx["arch_major"]))
    ctx["jit_nvcc_major"] = major(ctx["jit_nvcc"])
    ctx.update(_nccl(ctx, tables))
    ctx["torch_driver_min"] = tables["cuda_driver_min"].get(ctx["torch_cuda_major"] or "")
    ctx.update({f"env:{k}": str(v) for k, v in spec.env.items()})
    if facts is not None:
        ctx.update(_observed(facts))
    if spec.benchmarks is not None:
        ctx["load_dataset"] = spec.benchmarks.load.dataset
        ctx["load_dataset_path"] = spec.benchmarks.load.dataset_path
        ctx["model_path"] = spec.benchmarks.model_path
        ctx["model_num_experts"] = model_num_experts(spec.benchmarks.model_path)
        ctx.update(model_heads(spec.benchmarks.model_path))
    return ctx


NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")


def _nccl(ctx: Context, tables: dict[str, dict]) -> Context:
    """The NCCL torch's build pins (torch_nccl table) and an NCCL wheel the spec pins itself."""
    builds = tables.get("torch_nccl", {}).get(ctx.get("torch_minor") or "", {})
    out: Context = {"torch_nccl": builds.get(ctx.get("torch_cuda") or "")}
    for name in NCCL_PACKAGES:
        pin = exact_pin(ctx.get(f"pkg:{name}"))  # _packages' canonical names
        if pin:
            out.update(nccl_pin=pin, nccl_package=name)
            break
    return out


# Where a model's config.json says how many routed experts it has (Qwen-MoE, DeepSeek/Kimi, Mixtral).
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")


def model_num_experts(model_path: str) -> int | None:
    """The expert count of the model's config.json where it is readable here (validate runs on
    the host that will serve it, or not: unknown is never bad)."""
    return int_field(model_config(model_path), *EXPERT_KEYS)


def model_heads(model_path: str) -> Context:
    """The attention and KV head counts of the model's config.json, where readable here."""
    config = model_config(model_path)
    heads = int_field(config, "num_attention_heads", "n_head", "num_heads")
    return {"model_num_attention_heads": heads,
            "model_num_kv_heads": int_field(config, "num_key_value_heads", "num_kv_heads") or heads}


def tp_divides_heads(heads: int | None, kv_heads: int | None, attn_tp: int) -> bool | None:
    """SGLang's attention layers (0.5.11 models/llama.py and the others alike): the heads
    split evenly over the attention-TP ranks, and the KV heads either split evenly or are
    replicated (attn_tp a multiple of them). None when the model's config is not readable."""
    if not heads or attn_tp <= 1:
        return None
    if heads % attn_tp:
        return False
    if kv_heads:
        return kv_heads % attn_tp == 0 if kv_heads >= attn_tp else attn_tp % kv_heads == 0
    return True


def config_context(stack: Context, spec: Spec, config: str, feature_modules: dict[str, dict] | None = None,
                   installed_modules: frozenset[str] | None = None) -> Context:
    """The stack's facts plus one benchmark config's flags and env. ``installed_modules``: the
    modules the environment really has (the bench asks it), else the spec's packages decide."""
    assert spec.benchmarks is not None
    ctx = dict(stack)
    ctx["config"] = config
    flags = spec.benchmarks.flags_of(config)
    for flag, value in flags.items():
        ctx[flag] = value
        ctx["flag_" + flag[2:].replace("-", "_")] = value
    for name, value in spec.benchmarks.configs[config].env.items():
        ctx[f"env:{name}"] = None if value is None else str(value)
    ctx["world_size"] = _int(setting(flags, "--tp-size")) \
        or stack["gpu_count"]
    ctx["dp_size"] = _int(setting(flags, "--dp-size")) or 1
    ctx.update(_parallel(flags, ctx["dp_size"]))
    # attention-DP width: --attn-dp-size (sglang >= 0.5.22), or the older --dp-size N --enable-dp-attention
    ctx["attn_dp_size"] = _int(setting(flags, "--attn-dp-size")) \
        or (ctx["dp_size"] if flags.get("--enable-dp-attention") else 1)
    ctx["moe_runner_backend"] = str(flags.get("--moe-runner-backend", "auto"))  # SGLang's default
    ctx["attention_backends"] = [str(flags[f]) for f in ATTENTION_FLAGS if f in flags]
    # attention TP: --enable-dp-attention splits the tp ranks into attn_dp_size groups
    attn_dp = ctx["attn_dp_size"] if ctx["attn_dp_size"] and ctx["tp_size"] % ctx["attn_dp_size"] == 0 else 1
    ctx["attn_tp_size"] = ctx["tp_size"] // attn_dp
    ctx["tp_divides_heads"] = tp_divides_heads(stack.get("model_num_attention_heads"),
                                               stack.get("model_num_kv_heads"), ctx["attn_tp_size"])
    experts = stack.get("model_num_experts")
    ep = ctx["ep_size"]
    ctx["ep_divides_experts"] = None if not experts or ep <= 1 else experts % ep == 0
    # asked of the real environment: missing; read from the spec: not listed (may come another way)
    absent = _missing_modules(stack, flags, feature_modules or {}, installed_modules)
    ctx["missing_feature_modules" if installed_modules is not None else "unlisted_feature_modules"] = absent
    return ctx


ATTENTION_FLAGS = ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")


def parallel_of(flags: dict[str, Any]) -> Context:
    """The parallel layout of a config's flags (tp, pp, ep, the GPUs it takes)."""
    return _parallel(flags, _int(setting(flags, "--dp-size")) or 1)


def _parallel(flags: dict[str, Any], dp: int) -> Context:
    """The GPUs a launch takes, as SGLang lays ranks out (its defaults: tp 1, pp 1, ep 1): one
    replica is tp x pp ranks; --dp-size replicates it, unless --enable-dp-attention splits the
    attention of the same tp ranks. Experts spread over the tp ranks: moe_tp_size = tp // ep."""
    tp = _int(setting(flags, "--tp-size")) or 1
    pp = _int(setting(flags, "--pp-size")) or 1
    ep = _int(setting(flags, "--ep-size")) or 1
    replicas = 1 if flags.get("--enable-dp-attention") else dp
    layout = f"tp {tp} x pp {pp}" + (f" x dp {dp}" if replicas > 1 else "")
    return {"tp_size": tp, "pp_size": pp, "ep_size": ep, "gpus_needed": tp * pp * replicas,
            "parallel_layout": layout, "ep_divides_tp": ep > 0 and tp % ep == 0}


def _missing_modules(stack: Context, flags: dict[str, Any], feature_modules: dict[str, dict],
                     installed: frozenset[str] | None) -> str | None:
    """What this config's flags make SGLang import that the environment lacks, as text (None:
    nothing missing). Without ``installed``, a package the spec does not list counts as absent."""
    wanted = [(flag, str(flags[flag]), need) for flag, by_value in feature_modules.items()
              if flag in flags for value, need in by_value.items() if str(flags[flag]) == value]
    packages = {k[4:] for k in stack if k.startswith("pkg:")}
    missing = [(flag, value, need) for flag, value, need in wanted
               if (need["module"] not in installed if installed is not None
                   else canonical_name(need["package"]) not in packages)]
    return "; ".join(f"{flag} {value} imports {need['module']} (package {need['package']}, {need['get']})"
                     for flag, value, need in missing) or None


# --- pieces ---------------------------------------------------------------------------

def _hardware(spec: Spec, tables: dict[str, dict]) -> Context:
    gpu = spec.hardware.gpu
    m = re.fullmatch(r"sm_([0-9]+)([af]?)", gpu.arch)
    assert m, gpu.arch  # the spec model validated the pattern
    num = int(m.group(1))
    base = f"sm_{num}"
    arch_major = num // 10  # sm_120 -> 12, sm_90 -> 9
    return {
        "arch": gpu.arch, "arch_base": base, "arch_suffix": m.group(2), "arch_num": num,
        "arch_major": arch_major, "arch_toolkit": tables["arch_toolkit"].get(base),
        "gpu_count": gpu.count, "gpu_model": gpu.model or gpu.arch, "segment": gpu.segment,
        "interconnect": spec.hardware.interconnect,
    }


def _cuda(spec: Spec, facts: Facts | None, tables: dict[str, dict]) -> Context:
    ctx: Context = {"forward_compat": bool(spec.driver and spec.driver.forward_compat),
                    "driver_kernel_modules": spec.driver.kernel_modules if spec.driver else None}
    ctx["driver"] = lowest_version(spec.driver.version) if spec.driver else None
    if ctx["driver"] is None and facts is not None:
        ctx["driver"] = facts.driver_version  # the spec leaves the driver as it is
    toolkit = spec.cuda.selected if spec.cuda else None
    if toolkit is not None:
        release = ".".join(toolkit.version.split(".")[:2])
        ctx.update(cuda=toolkit.version, cuda_major=major(toolkit.version),
                   cuda_source=toolkit.source,
                   cuda_bundled_driver=tables["cuda_bundled_driver"].get(release,
                                                                         "the bundled driver"))
        ctx["cuda_driver_min"] = tables["cuda_driver_min"].get(ctx["cuda_major"])
        # pip's 12.x nvcc wheel carries ptxas only: no nvcc for the JIT there
        has_nvcc = not (toolkit.source == "pip" and ctx["cuda_major"] == "12")
        ctx["jit_nvcc"] = toolkit.version if has_nvcc else None
    observed = facts.jit_nvcc() if facts is not None else None
    if observed is not None:
        ctx["jit_nvcc"] = observed.release  # what the JIT really finds wins
    return ctx


def _kernel_build(package: str | None, version: str | None, builds: dict[str, dict]) -> Context:
    """The CUDA major the kernel package is built for: a local tag (+cu130) says it, else the
    PyPI wheel's common_ops says it (kernel_releases.yaml, read from each wheel)."""
    tag = local_cuda_tag(version)
    build = builds.get(package or "", {}).get(Version(version).public) if version and not tag else None
    cuda_major = major(_tag_version(tag)) if tag else (build or {}).get("cuda_major")
    return {"sglang_kernel_cuda_tag": tag,
            "sglang_kernel_cuda_major": None if cuda_major is None else str(cuda_major),
            "sglang_kernel_cuda_libraries": ", ".join((build or {}).get("libraries") or []) or None}


def _packages(spec: Spec, tables: dict[str, dict], arch_num: int) -> Context:
    pkgs = spec.python.canonical_packages
    ctx: Context = {f"pkg:{name}": spec_ for name, spec_ in pkgs.items()}
    pin = {name: exact_pin(pkgs.get(name)) for name in STACK_PACKAGES}
    ctx["unpinned_stack_packages"] = ", ".join(
        f"{n} {pkgs[n]}" for n in STACK_PACKAGES if n in pkgs and pin[n] is None)
    torch = pin["torch"]
    ctx["torch"] = torch
    tag = spec.python.torch_cuda or local_cuda_tag(torch)
    ctx["torch_cuda"] = tag
    ctx["torch_cuda_version"] = _tag_version(tag)
    ctx["torch_cuda_major"] = major(ctx["torch_cuda_version"])
    if torch:
        minor = ".".join(Version(torch).base_version.split(".")[:2])
        builds = tables["torch_builds"].get(minor)
        ctx["torch_minor"] = minor
        if builds:
            ctx["torch_tags"] = sorted(builds)
            ctx["torch_stable_tags"] = sorted(t for t, s in builds.items() if s == "stable")
            ctx["torch_cuda_status"] = builds.get(tag) if tag else None
    ctx["flashinfer"] = pin["flashinfer-python"]
    if ctx["flashinfer"]:
        known, gates = release_gates(tables["flashinfer_releases"], ctx["flashinfer"])
        ctx["flashinfer_gates_release"] = known
        # the trtllm all-reduce fusion module's arch gate (flashinfer/jit/comm.py)
        ctx["flashinfer_fusion_majors"] = (gates or {}).get("jit_majors", {}).get("gen_trtllm_comm_module")
        # the toolkit its JIT requires for this SM 12 minor (minor 1 stands for 12.1 and later)
        if arch_num // 10 == 12:
            ctx["flashinfer_sm12_cuda_min"] = ((gates or {}).get("sm12_cuda_min") or {}).get(min(arch_num % 10, 1))
    ctx["flashinfer_cubin"] = pin["flashinfer-cubin"]
    ctx["flashinfer_jit_cache_tag"] = local_cuda_tag(exact_pin(pkgs.get("flashinfer-jit-cache")))
    kernel_pkg = next((k for k in KERNEL_PACKAGES if k in pkgs), None)
    ctx["sglang_kernel_package"] = kernel_pkg
    ctx["sglang_kernel"] = pin[kernel_pkg] if kernel_pkg else None
    ctx.update(_kernel_build(kernel_pkg, ctx["sglang_kernel"], tables["kernel_releases"]))
    sglang = pin["sglang"]
    ctx["sglang"] = sglang
    if sglang:
        pins = tables["sglang_pins"].get(Version(sglang).public)
        ctx["sglang_pins_known"] = pins is not None
        if pins:
            ctx["sglang_pin_torch"] = pins["torch"]
            ctx["sglang_pin_flashinfer"] = pins["flashinfer"]
            ctx["sglang_pin_kernel"] = pins["kernel"]
            ctx["sglang_pin_kernel_package"] = pins["kernel_package"]
    return ctx


def release_gates(releases: dict[str, dict], version: str) -> tuple[str | None, dict | None]:
    """The gates of ``version``, or of a read post release of the same version (0.6.11 and
    0.6.11.post1 ship the same code gates); (None, None) when none was read: unknown."""
    wanted = Version(version)
    if wanted.public in releases:
        return wanted.public, releases[wanted.public]
    same = sorted((Version(v) for v in releases if Version(v).release == wanted.release))
    if not same:
        return None, None
    below = [v for v in same if v <= wanted]
    chosen = str(below[-1] if below else same[0])
    return chosen, releases[chosen]


def _sglang_gates(releases: dict[str, dict], sglang: str, arch_major: int) -> Context:
    """What the sglang release's own source says (read from its wheel: sglang_releases.yaml)."""
    _, gates = release_gates(releases, sglang)
    if gates is None:
        return {"sglang_gates_known": False}
    table = gates.get("symm_mem_world_sizes") or {}
    a2a = gates.get("a2a_flashinfer") or {}
    return {
        "sglang_gates_known": True,
        "sglang_symm_mem_majors": sorted(int(m) for m in table) if table else None,
        # world sizes this GPU's major has in the table; [] for a major the table lacks
        "symm_mem_world_sizes": table.get(arch_major, table.get(str(arch_major), [])) if table else None,
        "sglang_symm_mem_other_major": gates.get("symm_mem_other_major"),
        "sglang_fusion_majors": gates.get("fusion_majors"),
        "sglang_fusion_refuses_other": gates.get("fusion_refuses_other"),
        "sglang_a2a_runner_backends": a2a.get("runner_backends"),
        "sglang_a2a_needs_dp_attention": a2a.get("needs_dp_attention"),
        "sglang_a2a_dp_flag": a2a.get("dp_flag"),
        "sglang_grpc_port_check": gates.get("grpc_port_check"),
        "sglang_cuda_python_min_major": major((gates.get("pins") or {}).get("cuda-python-min")),
    }


def _observed(facts: Facts) -> Context:
    ctx: Context = {"nvml_error": facts.nvml_error, "observed_kernel_module": facts.kernel_module}
    if facts.gpus:
        ctx["observed_arch"] = facts.gpus[0].arch
        ctx["observed_gpu"] = facts.gpus[0].name
    return ctx


# --- small helpers --------------------------------------------------------------------

def _tag_version(tag: str | None) -> str | None:
    """``cu130`` -> ``13.0``, ``cu118`` -> ``11.8``."""
    if not tag:
        return None
    digits = tag[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _int(value: Any) -> int | None:
    """A flag's whole number; None for no value, text that is not one, or one beyond 64 bits (a
    spec refuses such a number, not such text: products of them would be too big to show)."""
    try:
        number = int(value) if value is not None and value is not True else None
    except (TypeError, ValueError):
        return None
    return number if number is None or abs(number) <= MAX_FLAG_NUMBER else None
