#!/usr/bin/env python3
"""Read SGLang's and FlashInfer's compatibility gates from their released wheels.

    python3 tools/wheel-facts/extract.py sglang --download 0.5.9 0.5.10 ... 0.5.23        # from PyPI
    python3 tools/wheel-facts/extract.py flashinfer --download 0.6.3 ... 0.7.2
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
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OUT = {"sglang": ROOT / "envmgr" / "compat" / "sglang_releases.yaml",
       "flashinfer": ROOT / "envmgr" / "compat" / "flashinfer_releases.yaml"}
DIST = {"sglang": "sglang", "flashinfer": "flashinfer-python"}
KERNEL_PACKAGES = ("sgl-kernel", "sglang-kernel")
PINNED = ("torch", "flashinfer-python", "flashinfer-cubin", *KERNEL_PACKAGES)
SYMM_TABLE = "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"


# --- one wheel --------------------------------------------------------------------------------


def read_wheel(path: Path, package: str = "sglang") -> dict:
    prefix = {"sglang": "sglang/srt/", "flashinfer": "flashinfer/jit/"}[package]
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(meta).decode("utf-8"))
        sources = {n: wheel.read(n).decode("utf-8", "replace") for n in names
                   if n.startswith(prefix) and n.endswith(".py")}
    if package == "flashinfer":
        return extract_flashinfer(metadata["Version"], sources)
    return extract(metadata["Version"], metadata.get_all("Requires-Dist") or [], sources)


def extract_flashinfer(version: str, sources: dict[str, str]) -> dict:
    """Every JIT module generator's arch gate: ``def gen_X_module`` ... ``supported_major_versions=[...]``."""
    gates: dict[str, list[int]] = {}
    for text in sources.values():
        tree = _parse(text)
        for func in ast.walk(tree) if tree is not None else ():
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if (isinstance(node, ast.keyword) and node.arg == "supported_major_versions"
                        and isinstance(node.value, (ast.List, ast.Tuple))):
                    gates[func.name] = sorted(e.value for e in node.value.elts
                                              if isinstance(e, ast.Constant) and isinstance(e.value, int))
    return {"version": version, "jit_majors": dict(sorted(gates.items()))}


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
                for key, value in zip(node.value.keys, node.value.values):
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
    dist = DIST[package]
    where = {"sglang": "sglang/srt/**/*.py, METADATA", "flashinfer": "flashinfer/jit/**/*.py"}[package]
    header = (
        f"# GENERATED by tools/wheel-facts/extract.py from the {dist} wheels on PyPI: do not\n"
        "# edit by hand; rerun it (`--download VERSIONS`) and commit the result. Each entry is what\n"
        "# that release's own source says (null: not found in it). Read by envmgr/compat/context.py;\n"
        "# the fields are explained in the script's docstring.\n")
    body = {"source": f"{dist} wheels from https://pypi.org/project/{dist}/ ({where})",
            "releases": {r["version"]: {k: v for k, v in r.items() if k != "version"} for r in releases}}
    return header + yaml.safe_dump(body, sort_keys=False, width=100)


def _version_key(version: str) -> tuple:
    from packaging.version import Version

    return (Version(version),)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", choices=sorted(OUT))
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--download", nargs="+", metavar="VERSION", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out = args.out or OUT[args.package]
    with tempfile.TemporaryDirectory() as tmp:
        wheels = list(args.wheels) + download(args.download, Path(tmp), args.package)
        releases = []
        for wheel in wheels:
            releases.append(read_wheel(wheel, args.package))
            print(f"{wheel.name}: {releases[-1]}", file=sys.stderr)
    out.write_text(document(releases, args.package), encoding="utf-8")
    print(f"wrote {out} ({len(releases)} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
