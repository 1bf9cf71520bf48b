"""tools/wheel-facts/extract.py: the gates read from an sglang wheel's source and
METADATA (small fixtures written like the releases' code), and the committed data it made."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from envmgr.compat.kb import default_knowledge_base, parse_releases, sglang_pins

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheel_facts_extract", ROOT / "tools" / "wheel-facts" / "extract.py")
extractor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(extractor)

TABLE = '''MiB = 1024 * 1024
TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = {
    9: {2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    10: {2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB},
}
'''
# 0.5.13's shape: indexed directly (KeyError for another major), A2A asserts dp-attention
OLD_SYMM = '''from x import TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
def f(self):
    if self.world_size not in TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability]:
        return
'''
NEW_SYMM = '''from x import TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
def f(self):
    supported = TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.get(self.device_capability)
'''
A2A = '''class ServerArgs:
    def _handle_a2a(self):
        if self.moe_a2a_backend == "flashinfer":
            assert (
                self.enable_dp_attention and self.dp_size == self.tp_size
            ), "Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention"
            assert self.moe_runner_backend in [
                "flashinfer_cutlass",
                "flashinfer_cutedsl",
            ], "Flashinfer MoE A2A is only supported with flashinfer_cutlass or flashinfer_cutedsl moe runner backend"
        self.grpc_port = self.port + 10000
        if not (1 <= self.grpc_port <= 65535):
            raise ValueError(f"SGLANG_GRPC_PORT ({self.grpc_port}) must be between 1 and 65535")
'''
FUSION = '''from sglang.srt.utils import is_sm90_supported, is_sm100_supported
def _resolve_backend(backend):
    if not (is_sm90_supported() or is_sm100_supported()):
        raise ValueError("FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.")
'''
REQUIRES = ["torch==2.11.0", "flashinfer_python==0.6.12", "sglang-kernel==0.4.3",
            "cuda-python>=13.0", "numpy", "deep_ep==1.0; extra == \"deepep\""]


def sources(symm: str, fusion: str | None = FUSION) -> dict[str, str]:
    files = {"sglang/srt/distributed/device_communicators/all_reduce_utils.py": TABLE,
             "sglang/srt/distributed/device_communicators/torch_symm_mem.py": symm,
             "sglang/srt/server_args.py": A2A}
    if fusion:
        files["sglang/srt/layers/flashinfer_comm_fusion.py"] = fusion
    return files


def test_a_release_like_0_5_13():
    gates = extractor.extract("0.5.13", REQUIRES, sources(OLD_SYMM, fusion=None))
    assert gates["pins"] == {"torch": "2.11.0", "flashinfer-python": "0.6.12", "sglang-kernel": "0.4.3",
                             "cuda-python-min": "13.0"}  # an extra's pin is not a plain install's
    assert gates["symm_mem_world_sizes"] == {9: [2, 4, 6, 8], 10: [2, 4, 6, 8]}
    assert gates["symm_mem_other_major"] == "KeyError"
    assert gates["a2a_flashinfer"] == {"runner_backends": ["flashinfer_cutlass", "flashinfer_cutedsl"],
                                       "needs_dp_attention": True, "dp_flag": "--enable-dp-attention"}
    assert (gates["fusion_majors"], gates["fusion_refuses_other"]) == (None, None)  # no such file
    assert gates["grpc_port_check"] is True


# 0.5.9-0.5.13 (layers/communicator.py): fusion is applied only on SM90/SM100, skipped elsewhere
COMMUNICATOR = '''def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and get_global_server_args().enable_flashinfer_allreduce_fusion
    )
'''


def test_a_release_that_only_skips_fusion_on_other_gpus_admits_its_majors_and_refuses_none():
    files = {**sources(OLD_SYMM, fusion="def nothing(): pass\n"), "sglang/srt/layers/communicator.py": COMMUNICATOR}
    gates = extractor.extract("0.5.13", REQUIRES, files)
    assert (gates["fusion_majors"], gates["fusion_refuses_other"]) == ([9, 10], False)
    # where the newer module raises, that gate is the one read
    gates = extractor.extract("0.5.14", REQUIRES, {**sources(NEW_SYMM), "sglang/srt/layers/communicator.py": COMMUNICATOR})
    assert (gates["fusion_majors"], gates["fusion_refuses_other"]) == ([9, 10], True)


def test_a_release_like_0_5_14_warns_and_has_the_fusion_gate():
    gates = extractor.extract("0.5.14", REQUIRES, sources(NEW_SYMM))
    assert gates["symm_mem_other_major"] == "warning"
    assert (gates["fusion_majors"], gates["fusion_refuses_other"]) == ([9, 10], True)


# 0.5.22's shape (arg_groups/moe_hook.py): the assert reads attn_dp_size, not enable_dp_attention
A2A_0_5_22 = '''def _handle_a2a_moe(server_args):
    cfg = resolving_view(server_args)
    if a2a_now == "flashinfer":
        assert attn_dp_enabled_of(cfg) and cfg.attn_dp_size == cfg.tp_size, (
            "Flashinfer MoE A2A is only supported with --attn-dp-size equal to --tp-size"
        )
'''


def test_a_release_like_0_5_22_asks_for_attn_dp_size():
    files = {**sources(NEW_SYMM), "sglang/srt/server_args.py": "x = 1\n",
             "sglang/srt/arg_groups/moe_hook.py": A2A_0_5_22}
    gates = extractor.extract("0.5.22", REQUIRES, files)
    assert gates["a2a_flashinfer"] == {"runner_backends": None, "needs_dp_attention": True,
                                       "dp_flag": "--attn-dp-size"}


# 0.5.19-0.5.23's shape: the runner assert spells it "FlashInfer", the dp assert "Flashinfer"
A2A_0_5_20 = A2A_0_5_22 + '''        assert resolved_view(server_args).moe_runner_backend in [
            "flashinfer_cutlass",
            "flashinfer_trtllm_routed",
            "deep_gemm",
        ], (
            "FlashInfer MoE A2A is supported with flashinfer_cutlass, "
            "flashinfer_trtllm_routed, or deep_gemm."
        )
'''


def test_the_a2a_asserts_are_read_in_any_spelling_of_flashinfer():
    files = {**sources(NEW_SYMM), "sglang/srt/server_args.py": "x = 1\n",
             "sglang/srt/arg_groups/moe_hook.py": A2A_0_5_20}
    gates = extractor.extract("0.5.20", REQUIRES, files)
    assert gates["a2a_flashinfer"]["runner_backends"] == ["flashinfer_cutlass", "flashinfer_trtllm_routed", "deep_gemm"]


def test_what_a_release_does_not_show_is_null_not_guessed():
    gates = extractor.extract("0.4.0", [], {"sglang/srt/server_args.py": "x = 1\n", "sglang/srt/bad.py": "def ("})
    assert gates["pins"] == {} and gates["symm_mem_world_sizes"] is None
    assert gates["symm_mem_other_major"] is None and gates["a2a_flashinfer"] is None
    assert gates["grpc_port_check"] is False


def test_a_wheel_file_is_read_without_importing_it(tmp_path):
    wheel = tmp_path / "sglang-0.5.14-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in sources(NEW_SYMM).items():
            z.writestr(name, text)
        z.writestr("sglang/srt/boom.py", "raise SystemExit('imported!')\n")
        z.writestr("sglang-0.5.14.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.14\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in REQUIRES))
    gates = extractor.read_wheel(wheel)
    assert gates["version"] == "0.5.14" and gates["symm_mem_other_major"] == "warning"
    doc = yaml.safe_load(extractor.document([gates]))
    assert doc["releases"]["0.5.14"]["pins"]["torch"] == "2.11.0"
    assert parse_releases(extractor.document([gates]))["0.5.14"]["fusion_refuses_other"] is True


def test_committed_data_is_the_knowledge_bases_and_holds_the_known_pins():
    releases = default_knowledge_base().tables["sglang_releases"]
    assert {"0.5.9", "0.5.13", "0.5.14", "0.5.23"} <= set(releases)
    pins = sglang_pins(releases)
    assert pins["0.5.9"] == {"torch": "2.9.1", "flashinfer": "0.6.3", "kernel_package": "sgl-kernel",
                             "kernel": "0.3.21"}
    assert pins["0.5.23"]["torch"] == "2.14.1"
    # sglang >= 0.5.11 requires cuda-python >= 13: a CUDA 13 stack from PyPI
    assert all(releases[v]["pins"].get("cuda-python-min", "0").startswith("13")
               for v in releases if tuple(map(int, v.split("."))) >= (0, 5, 11))


def test_malformed_release_data_is_a_knowledge_base_error():
    from envmgr.errors import KnowledgeBaseError

    with pytest.raises(KnowledgeBaseError, match="malformed release data") as caught:
        parse_releases("releases: [1, 2]\n")
    assert "rerun tools/wheel-facts" in caught.value.hint


COMM = '''def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10, 12]
    )
    return gen_jit_spec("trtllm_comm", [], extra_cuda_cflags=nvcc_flags)


def gen_vllm_comm_module() -> JitSpec:
    return gen_jit_spec("vllm_comm", [])
'''


def test_flashinfer_jit_gates_per_module_generator():
    gates = extractor.extract_flashinfer("0.6.17", {"flashinfer/jit/comm.py": COMM})
    assert gates == {"version": "0.6.17", "jit_majors": {"gen_trtllm_comm_module": [9, 10, 12]},
                     "sm12_cuda_min": None}


# the shapes of _normalize_cuda_arch in flashinfer 0.6.7 and 0.7.1 (compilation_context.py)
CONTEXT_067 = '''class CompilationContext:
    @staticmethod
    def _normalize_cuda_arch(major: int, minor: int) -> tuple[int, str]:
        if major == 9:
            return (major, str(minor) + "a")
        elif major == 12:
            if is_cuda_version_at_least("12.9"):
                return (major, "0f")
            else:
                raise RuntimeError("SM 12.x requires CUDA >= 12.9")
        return (major, str(minor))
'''
CONTEXT_071 = CONTEXT_067.replace('''            if is_cuda_version_at_least("12.9"):
                return (major, "0f")
            else:
                raise RuntimeError("SM 12.x requires CUDA >= 12.9")''', '''            if minor == 0:
                if is_cuda_version_at_least("12.8"):
                    return (major, "0a")
                raise RuntimeError("SM 120 requires CUDA >= 12.8")
            if is_cuda_version_at_least("12.9"):
                return (major, str(minor) + "a")
            raise RuntimeError("SM 12.1+ requires CUDA >= 12.9")''')


@pytest.mark.parametrize(("source", "expected"), [
    (CONTEXT_067, {0: "12.9", 1: "12.9"}),
    (CONTEXT_071, {0: "12.8", 1: "12.9"}),
    ("class CompilationContext:\n    pass\n", None),  # before 0.6.7: no check of its own
])
def test_the_sm12x_toolkit_check_is_read_from_compilation_context(source, expected):
    gates = extractor.extract_flashinfer("x", {"flashinfer/compilation_context.py": source})
    assert gates["sm12_cuda_min"] == expected


def test_a_new_wording_of_the_check_is_refused_not_guessed():
    source = CONTEXT_067.replace("SM 12.x requires CUDA >= 12.9", "SM 12.2 and later requires CUDA >= 13.1")
    with pytest.raises(ValueError, match="extend SM12_CHECK"):
        extractor.extract_flashinfer("x", {"flashinfer/compilation_context.py": source})


def test_committed_flashinfer_data_has_sm12x_fusion_from_0_6_17():
    from envmgr.compat.context import release_gates

    releases = default_knowledge_base().tables["flashinfer_releases"]
    fusion = {v: r["jit_majors"].get("gen_trtllm_comm_module") for v, r in releases.items()}
    # every release 0.6.0-0.7.4 read: the boundary is 0.6.16 -> 0.6.17, as flashinfer PR #3903 says
    assert fusion["0.6.16"] == [9, 10] and fusion["0.6.17"] == [9, 10, 12]
    assert all(12 not in majors for v, majors in fusion.items() if Version(v) < Version("0.6.17"))
    assert all(12 in majors for v, majors in fusion.items() if Version(v) >= Version("0.6.17"))
    # a post release that was not read takes the nearest read one of the same version
    assert release_gates(releases, "0.6.11.post3")[0] == "0.6.11.post1"
    assert release_gates(releases, "0.6.11")[0] == "0.6.11"
    assert release_gates(releases, "0.5.3") == (None, None)  # not read: unknown, never guessed


# --- kernel wheels: the CUDA build from the ELF DT_NEEDED of common_ops (tools/wheel-facts/elf.py) ---

def _real_extension() -> Path:
    import pydantic_core  # a compiled extension every test environment has

    return next(Path(pydantic_core.__file__).parent.glob("*.so"))


def test_elf_needed_agrees_with_readelf_on_a_real_extension():
    import shutil
    import subprocess

    so = _real_extension()
    names = extractor.elf.needed(so.read_bytes())
    assert "libc.so.6" in names
    if shutil.which("readelf"):  # binutils, where installed: the reference reader
        out = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
        assert names == [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_a_kernel_wheel_s_cuda_build_is_read_from_its_common_ops(tmp_path):
    # a real ELF whose libpthread.so.0 entry is renamed libcudart.so.13 (same length: offsets hold)
    elf_bytes = _real_extension().read_bytes()
    assert b"libpthread.so.0" in elf_bytes
    cuda13 = elf_bytes.replace(b"libpthread.so.0\0", b"libcudart.so.13\0")
    wheel = tmp_path / "sglang_kernel-0.4.99-cp310-abi3-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("sgl_kernel/sm90/common_ops.abi3.so", cuda13)
        z.writestr("sgl_kernel/sm100/common_ops.abi3.so", cuda13)
        z.writestr("sgl_kernel/__init__.py", "")
    read = extractor.elf.file_ranges(wheel)
    build = extractor.kernel_build("sglang-kernel==0.4.99", read, wheel.stat().st_size)
    assert build["cuda_major"] == 13 and build["libraries"] == ["libcudart.so.13"]
    assert build["read"] == ["sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/sm90/common_ops.abi3.so"]
    # two CUDA majors in one wheel: refused, not guessed
    with zipfile.ZipFile(wheel, "a", zipfile.ZIP_STORED) as z:
        z.writestr("sgl_kernel/sm120/common_ops.abi3.so", elf_bytes.replace(b"libpthread.so.0\0", b"libcudart.so.12\0"))
    with pytest.raises(ValueError, match="links CUDA majors"):
        extractor.kernel_build("sglang-kernel==0.4.99", extractor.elf.file_ranges(wheel), wheel.stat().st_size)
    assert extractor._kernel_id(wheel.name) == "sglang-kernel==0.4.99"
