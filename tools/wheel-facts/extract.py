#!/usr/bin/env python3
"""Read SGLang's and FlashInfer's compatibility gates from their released wheels.

    python3 tools/wheel-facts/extract.py sglang --download 0.5.9 0.5.10 ... 0.5.23        # from PyPI
    python3 tools/wheel-facts/extract.py flashinfer --download 0.6.0 ... 0.7.4
    python3 tools/wheel-facts/extract.py sglang|flashinfer WHEEL [WHEEL ...] [--out FILE]  # local wheels

The output goes to envmgr/compat/sglang_releases.yaml or flashinfer_releases.yaml.

Each wheel's Python source is parsed (``ast``, never imported or run) for the literal tables
and asserts the rules depend on; its METADATA gives the pins. What a release does not show is
written as null ("not found"), never guessed. The rules read the output (``envmgr/compat/
context.py``); ``tests/unit/test_wheel_facts.py`` checks the extraction on small fixtures and
that every rule's release boundary agrees with the committed data.

Gates read, per sglang release:
  pins                 Requires-Dist exact pins: torch, flashinfer-python, flashinfer-cubin, the
                       kernel package (sgl-kernel or sglang-kernel), cuda-python's lower bound
  symm_mem_world_sizes {major: [world sizes]} of TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
                       (distributed/device_communicators/all_reduce_utils.py)
  symm_mem_other_major "KeyError" when torch_symm_mem.py indexes that table by the GPU's major
                       (any other major raises), "warning" when it uses .get() and warns
  fusion_majors        the majors SGLang's own fusion gate admits (is_sm90/is_sm100 checks), with
                       fusion_refuses_other: true where flashinfer_comm_fusion.py raises "requires
                       SM90 or SM10X" (0.5.14+), false where the communicator's
                       apply_flashinfer_allreduce_fusion only skips fusion on the others (to 0.5.13)
  a2a_flashinfer       from the asserts whose message names "FlashInfer MoE A2A" (any case: 0.5.19
                       spells it "FlashInfer" in one assert, "Flashinfer" in another): the runner
                       backends it accepts, whether it needs attention DP as wide as TP, and
                       the flag that asks for it (--enable-dp-attention, --attn-dp-size from 0.5.22)
  grpc_port_check      server_args derives grpc_port = port + 10000 and checks it <= 65535

Per flashinfer release:
  jit_majors           {JIT module generator: [SM majors]} from every `supported_major_versions=[...]`
                       in flashinfer/jit/**.py (gen_trtllm_comm_module is the all-reduce fusion's)
  sm12_cuda_min        {SM 12 minor: CUDA release} the JIT checks before it compiles for SM12x
                       (compilation_context.py _normalize_cuda_arch: "SM 12.x requires CUDA >= 12.9";
                       1 stands for 12.1 and later); null where there is no such check

Per kernel release (sgl-kernel, sglang-kernel; the PyPI x86_64 wheel, read by HTTP ranges:
only the zip directory and the extension travel, see elf.py):
    python3 tools/wheel-facts/extract.py kernel --download sglang-kernel==0.4.1 sgl-kernel==0.3.21 ...
  cuda_major           the CUDA major the build links (libcudart.so.N in the DT_NEEDED entries of
                       every sgl_kernel/**/common_ops*.so; one value, or the release is refused)
  libraries            those CUDA libraries (libcudart, libcublas, libcublasLt, libnvrtc)
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import yaml

# elf.py beside this script (the folder is no package: tests load this file by path)
_elf_spec = importlib.util.spec_from_file_location("wheel_facts_elf", Path(__file__).with_name("elf.py"))
elf = importlib.util.module_from_spec(_elf_spec)
_elf_spec.loader.exec_module(elf)

ROOT = Path(__file__).resolve().parents[2]
OUT = {"sglang": ROOT / "envmgr" / "compat" / "sglang_releases.yaml",
       "flashinfer": ROOT / "envmgr" / "compat" / "flashinfer_releases.yaml",
       "kernel": ROOT / "envmgr" / "compat" / "kernel_releases.yaml"}
DIST = {"sglang": "sglang", "flashinfer": "flashinfer-python"}
KERNEL_PACKAGES = ("sgl-kernel", "sglang-kernel")
PINNED = ("torch", "flashinfer-python", "flashinfer-cubin", *KERNEL_PACKAGES)
SYMM_TABLE = "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"


# --- one wheel --------------------------------------------------------------------------------


SOURCES = {"sglang": ("sglang/srt/",), "flashinfer": ("flashinfer/jit/", "flashinfer/compilation_context.py")}


def read_wheel(path: Path, package: str = "sglang") -> dict:
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(meta).decode("utf-8"))
        sources = {n: wheel.read(n).decode("utf-8", "replace") for n in names
                   if n.startswith(SOURCES[package]) and n.endswith(".py")}
    if package == "flashinfer":
        return extract_flashinfer(metadata["Version"], sources)
    return extract(metadata["Version"], metadata.get_all("Requires-Dist") or [], sources)


def extract_flashinfer(version: str, sources: dict[str, str]) -> dict:
    """Every JIT module generator's arch gate (``def gen_X_module`` ... ``supported_major_versions=[...]``)
    and the CUDA toolkit its SM12x target needs."""
    gates: dict[str, list[int]] = {}
    for name, text in sources.items():
        if not name.startswith("flashinfer/jit/"):
            continue
        tree = _parse(text)
        for func in ast.walk(tree) if tree is not None else ():
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if (isinstance(node, ast.keyword) and node.arg == "supported_major_versions"
                        and isinstance(node.value, (ast.List, ast.Tuple))):
                    gates[func.name] = sorted(e.value for e in node.value.elts
                                              if isinstance(e, ast.Constant) and isinstance(e.value, int))
    context = _parse(sources.get("flashinfer/compilation_context.py", ""))
    return {"version": version, "jit_majors": dict(sorted(gates.items())),
            "sm12_cuda_min": sm12_cuda_min(context) if context is not None else None}


# "SM 12.x requires CUDA >= 12.9" (0.6.7), "SM 120 requires CUDA >= 12.8" and
# "SM 12.1+ requires CUDA >= 12.9" (later): which SM 12 minors each message is about
SM12_CHECK = re.compile(r"^SM (12\.x|120|12\.1\+|12\.(\d)) requires CUDA >= (\d+\.\d+)$")


def sm12_cuda_min(tree: ast.AST) -> dict[int, str] | None:
    """{SM 12 minor: the CUDA release it needs}, from the RuntimeErrors _normalize_cuda_arch raises
    (flashinfer/compilation_context.py); minor 1 stands for 12.1 and later. None: no such check
    (the release targets compute_120a and leaves the toolkit to nvcc)."""
    out: dict[int, str] = {}
    for func in ast.walk(tree):
        if not (isinstance(func, ast.FunctionDef) and func.name == "_normalize_cuda_arch"):
            continue
        for node in ast.walk(func):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
                    and isinstance(node.exc.args[0], ast.Constant) and isinstance(node.exc.args[0].value, str)):
                continue
            text = node.exc.args[0].value
            match = SM12_CHECK.match(text)
            if match is None:
                if "requires CUDA" in text:  # a new wording: refuse to guess what it covers
                    raise ValueError(f"_normalize_cuda_arch raises {text!r}: extend SM12_CHECK")
                continue
            which, minor, cuda = match.groups()
            minors = {"12.x": (0, 1), "120": (0,), "12.1+": (1,)}.get(which) or (int(minor),)
            for m in minors:
                out[m] = cuda
    return dict(sorted(out.items())) or None


def extract(version: str, requires: list[str], sources: dict[str, str]) -> dict:
    """The gates of one release, from its Requires-Dist lines and its ``sglang/srt`` sources."""
    trees = {name: _parse(text) for name, text in sources.items()}
    trees = {name: tree for name, tree in trees.items() if tree is not None}
    return {
        "version": version,
        "pins": pins(requires),
        "symm_mem_world_sizes": symm_mem_world_sizes(trees),
        "symm_mem_other_major": symm_mem_other_major(trees),
        **fusion_gate(trees),
        "a2a_flashinfer": a2a_flashinfer(trees),
        "grpc_port_check": any("port + 10000" in text and "must be between 1 and 65535" in text
                               for text in sources.values()),
    }


def _parse(text: str) -> ast.AST | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def pins(requires: list[str]) -> dict:
    """Exact pins (``name==X``) of the stack packages, unconditional requirements only."""
    found: dict[str, str] = {}
    for line in requires:
        if ";" in line and "extra ==" in line:
            continue  # an extra's requirement is not what a plain install gets
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*\(?\s*==\s*([^\s,;)]+)", line)
        if m and m.group(1).lower().replace("_", "-") in PINNED:
            found[m.group(1).lower().replace("_", "-")] = m.group(2)
        m = re.match(r"^\s*cuda-python\s*\(?\s*>=\s*([^\s,;)]+)", line)
        if m:
            found["cuda-python-min"] = m.group(1)
    return found


def symm_mem_world_sizes(trees: dict[str, ast.AST]) -> dict[int, list[int]] | None:
    for tree in trees.values():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == SYMM_TABLE
                                                     for t in node.targets)
                    and isinstance(node.value, ast.Dict)):
                table = {}
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Dict):
                        table[int(key.value)] = sorted(int(k.value) for k in value.keys
                                                       if isinstance(k, ast.Constant))
                return table
    return None


def symm_mem_other_major(trees: dict[str, ast.AST]) -> str | None:
    """How the communicator treats a major the table lacks: ``table[major]`` raises KeyError;
    ``table.get(major)`` lets it warn and fall back."""
    users = [tree for name, tree in trees.items() if name.endswith("torch_symm_mem.py")]
    for tree in users:
        gets = subscripts = 0
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get" and _is_name(node.func.value, SYMM_TABLE)):
                gets += 1
            if isinstance(node, ast.Subscript) and _is_name(node.value, SYMM_TABLE):
                subscripts += 1
        if gets:
            return "warning"
        if subscripts:
            return "KeyError"
    return None


def fusion_gate(trees: dict[str, ast.AST]) -> dict:
    """The majors SGLang's FlashInfer all-reduce fusion admits (its own gate, whatever
    flashinfer offers), and whether it raises for the others: 0.5.14+ raise in
    flashinfer_comm_fusion.py; before, the communicator's apply_flashinfer_allreduce_fusion
    only skips fusion on the others (the flag is accepted and does nothing)."""
    for name, tree in trees.items():
        if name.endswith("flashinfer_comm_fusion.py"):
            text = ast.unparse(tree)
            if "requires SM90 or SM10X" in text:
                return {"fusion_majors": sorted(_majors(text)) or None, "fusion_refuses_other": True}
    for name, tree in trees.items():
        if name.endswith("layers/communicator.py"):
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == "apply_flashinfer_allreduce_fusion":
                    majors = sorted(_majors(ast.unparse(node)))
                    return {"fusion_majors": majors or None, "fusion_refuses_other": False if majors else None}
    return {"fusion_majors": None, "fusion_refuses_other": None}


def _majors(text: str) -> set[int]:
    # is_sm90_supported / is_sm100_supported (<= 0.5.19), get_platform().is_sm90 / .is_sm100,
    # the communicator's module-level _is_sm90_supported (<= 0.5.13)
    found = set()
    for digits in re.findall(r"(?<![A-Za-z0-9])_?is_sm(\d+)(?:_supported)?\b", text):
        found.add(int(digits) // 10)  # sm90 -> 9, sm100 -> 10
    return found


def a2a_flashinfer(trees: dict[str, ast.AST]) -> dict | None:
    """From the asserts whose message names "Flashinfer MoE A2A" (server_args.py)."""
    runners: list[str] | None = None
    dp_attention, dp_flag = False, None
    seen = False
    for tree in trees.values():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assert) and node.msg is not None
                    and "flashinfer moe a2a" in ast.unparse(node.msg).lower()):
                continue
            seen = True
            test = node.test
            if (isinstance(test, ast.Compare) and _attr(test.left) == "moe_runner_backend"
                    and isinstance(test.ops[0], ast.In) and isinstance(test.comparators[0], (ast.List, ast.Tuple))):
                runners = [e.value for e in test.comparators[0].elts if isinstance(e, ast.Constant)]
            names = {_attr(n) for n in ast.walk(test)}
            if "attn_dp_size" in names:  # 0.5.22: --dp-size N --enable-dp-attention became --attn-dp-size N
                dp_attention, dp_flag = True, "--attn-dp-size"
            elif "enable_dp_attention" in names:
                dp_attention, dp_flag = True, "--enable-dp-attention"
    if not seen:
        return None
    return {"runner_backends": runners, "needs_dp_attention": dp_attention, "dp_flag": dp_flag}


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _attr(node: ast.AST) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else None


# --- one kernel wheel -------------------------------------------------------------------------

CUDA_LIBRARY = re.compile(r"^(libcudart|libcublas|libcublasLt|libnvrtc)\.so\.(\d+)$")


def kernel_build(version: str, read: "elf.Read", size: int) -> dict:
    """The CUDA build of one kernel wheel, from its common_ops extensions' DT_NEEDED."""
    libraries: set[str] = set()
    majors: set[int] = set()
    names = elf.members(read, size)
    ops = sorted(n for n in names if re.fullmatch(r"sgl_kernel/(?:.+/)?common_ops[.\w-]*\.so", n))
    for name in ops:
        for lib in elf.needed(elf.member_bytes(read, names[name])):
            match = CUDA_LIBRARY.match(lib)
            if match:
                libraries.add(lib)
                majors.add(int(match.group(2)))
    if len(majors) > 1:
        raise ValueError(f"{version}: common_ops links CUDA majors {sorted(majors)}: {sorted(libraries)}")
    return {"version": version, "cuda_major": majors.pop() if majors else None,
            "libraries": sorted(libraries), "read": ops}


def pypi_kernel_wheel(package: str, version: str) -> tuple[str, int]:
    """The URL and size of a kernel release's manylinux x86_64 wheel on PyPI."""
    index = f"https://pypi.org/pypi/{package}/json"
    with urllib.request.urlopen(index, timeout=60) as response:
        files = json.load(response)["releases"].get(version) or []
    wheel = next((f for f in files if re.search(r"manylinux\w*_x86_64\.whl$", f["filename"])), None)
    if wheel is None:
        raise ValueError(f"{package} {version}: no manylinux x86_64 wheel on PyPI")
    return urllib.parse.urljoin(index, wheel["url"]), wheel["size"]


# --- many releases ----------------------------------------------------------------------------


def download(versions: list[str], into: Path, package: str = "sglang") -> list[Path]:
    dist = DIST[package]
    wheels = []
    for version in versions:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--platform", "manylinux_2_34_x86_64",
                        "--platform", "any", f"{dist}=={version}", "-d", str(into)], check=True)
        wheels.append(next(into.glob(f"{dist.replace('-', '_')}-{version}-*.whl")))
    return wheels


def document(releases: list[dict], package: str = "sglang") -> str:
    releases = sorted(releases, key=lambda r: _version_key(r["version"]))
    if package == "kernel":
        return document_kernels(releases)
    dist = DIST[package]
    where = ", ".join([f"{s}**/*.py" if s.endswith("/") else s for s in SOURCES[package]]
                      + (["METADATA"] if package == "sglang" else []))
    header = (
        f"# GENERATED by tools/wheel-facts/extract.py from the {dist} wheels on PyPI: do not\n"
        "# edit by hand; rerun it (`--download VERSIONS`) and commit the result. Each entry is what\n"
        "# that release's own source says (null: not found in it). Read by envmgr/compat/context.py;\n"
        "# the fields are explained in the script's docstring.\n")
    body = {"source": f"{dist} wheels from https://pypi.org/project/{dist}/ ({where})",
            "releases": {r["version"]: {k: v for k, v in r.items() if k != "version"} for r in releases}}
    return header + yaml.safe_dump(body, sort_keys=False, width=100)


def document_kernels(releases: list[dict]) -> str:
    header = (
        "# GENERATED by tools/wheel-facts/extract.py kernel from the sgl-kernel / sglang-kernel wheels on\n"
        "# PyPI (the manylinux x86_64 wheel of each release): do not edit by hand. Each entry is the CUDA\n"
        "# major its common_ops extensions link (libcudart.so.N in their ELF DT_NEEDED; null: none found).\n"
        "# Read by envmgr/compat/context.py (sglang_kernel_cuda_major).\n")
    body: dict = {"source": "sgl-kernel and sglang-kernel wheels from https://pypi.org/ "
                            "(sgl_kernel/**/common_ops*.so, ELF DT_NEEDED)", "releases": {}}
    for release in releases:
        package, version = release["version"].split("==")
        body["releases"].setdefault(package, {})[version] = {
            k: v for k, v in release.items() if k != "version"}
    return header + yaml.safe_dump(body, sort_keys=False, width=100)


def _version_key(version: str) -> tuple:
    from packaging.version import Version

    package, _, bare = version.rpartition("==")
    return (package, Version(bare))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", choices=sorted(OUT))
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--download", nargs="+", metavar="VERSION", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out = args.out or OUT[args.package]
    if args.package == "kernel":  # package==version each, read by HTTP ranges (a local wheel: its path)
        releases = []
        for wheel in args.wheels:
            releases.append(kernel_build(_kernel_id(wheel.name), elf.file_ranges(wheel), wheel.stat().st_size))
        for spec in args.download:
            package, version = spec.split("==")
            url, size = pypi_kernel_wheel(package, version)
            releases.append(kernel_build(spec, elf.http_ranges(url), size))
            print(f"{spec}: CUDA {releases[-1]['cuda_major']} {releases[-1]['libraries']}", file=sys.stderr)
        out.write_text(document(releases, "kernel"), encoding="utf-8")
        print(f"wrote {out} ({len(releases)} releases)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        wheels = list(args.wheels) + download(args.download, Path(tmp), args.package)
        releases = []
        for wheel in wheels:
            releases.append(read_wheel(wheel, args.package))
            print(f"{wheel.name}: {releases[-1]}", file=sys.stderr)
    out.write_text(document(releases, args.package), encoding="utf-8")
    print(f"wrote {out} ({len(releases)} releases)")
    return 0


def _kernel_id(filename: str) -> str:
    """'sglang_kernel-0.4.1-cp310-abi3-...whl' -> 'sglang-kernel==0.4.1'."""
    dist, version = filename.split("-")[:2]
    return f"{dist.replace('_', '-')}=={version}"


if __name__ == "__main__":
    sys.exit(main())
