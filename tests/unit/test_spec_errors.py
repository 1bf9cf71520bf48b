"""Malformed specs and the messages they get: file, line, dotted field, and what to do.

Each case mutates one small valid spec (BASE) and names the line the problem must point
at by a fragment of that line's text, so that inserting lines does not break the table.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from envmgr.errors import ExtendsError, SpecError
from envmgr.spec import deep_merge, load_spec
from envmgr.spec.source import MAX_DEPTH

SPECS = Path(__file__).resolve().parents[2] / "specs"

BASE = textwrap.dedent("""\
    apiVersion: envmgr/v1
    metadata:
      name: demo
    hardware:
      gpu:
        arch: sm_90
        count: 1
        segment: datacenter
      interconnect: pcie
    driver:
      version: "580.95.05"
    cuda:
      toolkits:
        - version: "12.8"
          source: apt
      select: "12.8"
    python:
      version: "3.12"
      torch_cuda: cu128
      packages:
        torch: "2.9.1"
    env:
      CUDA_HOME: /usr/local/cuda
    realize:
      ansible:
        max_fail_percentage: 10
    probes:
      required: [gpu]
      expected_fail: [symm_mem]
    benchmarks:
      model_path: /models/m
      server_flags:
        --tp-size: 1
      configs:
        baseline:
          flags:
            --port: 30000
          env:
            NCCL_DEBUG: INFO
      load:
        input_len: 1024
    """)


def edit(*pairs: str, text: str = BASE) -> str:
    """BASE with each (old, new) replaced; every ``old`` must occur exactly once."""
    assert len(pairs) % 2 == 0
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def child(*lines: str) -> str:
    return "\n".join(("apiVersion: envmgr/v1", "extends: spec.yaml", *lines)) + "\n"


@dataclass
class Case:
    id: str
    files: dict[str, str]  # file name -> text; main.yaml (or the only file) is loaded
    line: int | str | None  # a number, or a fragment of the line's text in ``file``
    field: str
    says: tuple[str, ...]  # fragments of the rendered problem (message, expected, fix)
    file: str = "main.yaml"
    count: int = 1  # problems in total
    error: type[SpecError] = SpecError


def case(id: str, text: str | dict[str, str], line: int | str | None, field: str, *says: str,
         **kw) -> Case:
    files = {"main.yaml": text} if isinstance(text, str) else text
    return Case(id, files, line, field, says, **kw)


PARENT_COUNT_0 = edit("count: 1", "count: 0")
HUGE = "9" * 5000  # digits past int()'s 4300

# The YAML cases assert what envmgr adds (the "not valid YAML" prefix, the line, the line of
# the construct left open, the fix), never PyYAML's own wording, which changes between releases.
CASES = [
    # --- YAML syntax and document shape -----------------------------------------------------
    case("tab-indent", edit("    count: 1", "\tcount: 1"), "count: 1", "",
         "not valid YAML", "indent with spaces: YAML does not allow tabs"),
    case("unclosed-flow-list", edit("[gpu]", "[gpu"), "expected_fail:", "",
         "not valid YAML", "at line 28)"),
    case("unclosed-flow-map", edit("  toolkits:", "  toolkits: {a: 1"), "- version", "",
         "not valid YAML", "at line 13)"),
    case("unclosed-quote-at-end", edit("input_len: 1024", 'input_len: "1024'), 42, "",
         "not valid YAML", "at line 41)"),
    case("unclosed-quote-mid-file", edit('"580.95.05"', '"580.95.05'), '- version: "12.8"', "",
         "not valid YAML", "at line 11)"),
    case("bad-indent", edit("  interconnect: pcie", "   interconnect: pcie"), "interconnect", "",
         "not valid YAML"),
    case("control-character", edit("name: demo", "name: de\x01mo"), "name: de", "",
         "not valid YAML", "U+0001"),
    case("two-documents", BASE + "---\nmetadata: {name: x}\n", "---", "",
         "not valid YAML"),
    case("empty-file", "", 1, "", "the file is empty", "apiVersion: envmgr/v1"),
    case("only-comments", "# nothing here\n", 1, "", "the file is empty"),
    case("top-level-list", "- apiVersion: envmgr/v1\n- kind: Environment\n", 1, "",
         "the document is a list", "expected a mapping"),
    case("top-level-string", "just text\n", 1, "", "the document is a string"),
    case("duplicate-top-level-key", BASE + "metadata:\n  name: again\n", 42, "metadata",
         "duplicate key 'metadata'", "keep one of them"),
    case("duplicate-nested-key", edit("    count: 1", "    count: 1\n    count: 2"), "count: 2",
         "hardware.gpu.count", "duplicate key 'count'"),
    case("duplicate-package", edit('torch: "2.9.1"', 'torch: "2.9.1"\n    torch: "2.10.0"'),
         "2.10.0", "python.packages.torch", "duplicate key 'torch'"),
    case("non-string-key", edit("  CUDA_HOME: /usr/local/cuda", "  [A, B]: 1"), "[A, B]", "env",
         "a key must be a plain string"),
    case("bad-bool-tag", edit("source: apt", "source: !!bool maybe"), "source:",
         "cuda.toolkits[0].source", "cannot read 'maybe' as !!bool", "quotes"),
    case("python-tag", edit("required: [gpu]", "required: !!python/object/apply:os.system [ls]"),
         "required:", "probes.required", "unsupported tag !!python/object/apply:os.system",
         "remove the tag"),
    case("impossible-date", edit('version: "12.8"', "version: 2024-13-45"), "2024-13-45",
         "cuda.toolkits[0].version", "cannot read '2024-13-45' as !!timestamp"),
    case("deeply-nested", edit("CUDA_HOME: /usr/local/cuda", "X: " + "[" * 100 + "]" * 100), "X: [[",
         "", f"nested more than {MAX_DEPTH} levels deep"),
    case("deeply-nested-unclosed", edit("CUDA_HOME: /usr/local/cuda", "X: " + "[" * 200_000),
         "X: [[", "", f"nested more than {MAX_DEPTH} levels deep"),
    case("recursive-alias", edit("  CUDA_HOME: /usr/local/cuda", "  X: &x [1, *x]"), "X: &x",
         "env.X[1]", "recursive alias"),
    case("recursive-merge", edit("    baseline:", "    baseline: &b\n      <<: *b"), "baseline:",
         "benchmarks.configs.baseline", "recursive `<<:` merge"),
    case("merge-of-scalar", edit("  load:", "  load:\n    <<: 5"), "<<: 5", "benchmarks.load",
         "`<<:` must name a mapping"),
    case("alias-bomb",
         edit("realize:\n", "x: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
              + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))
              + "realize:\n"),
         "x4:", "x4", "more than 100000 values"),
    # --- values that become argv, paths or URLs (issue 12) ---------------------------------------
    case("infinite-flag", edit("--tp-size: 1", "--tp-size: .inf"), "--tp-size",
         "benchmarks.server_flags.--tp-size", "got inf", "expected a finite number"),
    case("nan-timeout", edit("    input_len: 1024", "    timeout_s: .nan"), "timeout_s",
         "benchmarks.load.timeout_s", "expected a finite number"),
    case("nul-in-model-path", edit("model_path: /models/m", 'model_path: "/models/a\\0b"'), "model_path",
         "benchmarks.model_path", "control characters ('\\x00')", "command-line argument or a path"),
    case("newline-in-flag-value", edit("--port: 30000", '--port: "30000\\n--evil"'), "--port",
         "benchmarks.configs.baseline.flags.--port", "control characters ('\\n')"),
    case("group-with-a-query", edit("    max_fail_percentage: 10", "    group: 'all?inventory=/other.yml'"),
         "group:", "realize.ansible.group", "an Ansible group or host name"),
    case("venv-path-with-a-query", edit("  ansible:\n", "  venv: {path: '/x?installer=pip'}\n  ansible:\n"),
         "venv:", "realize.venv.path", "'?' and '#' are not allowed"),
    case("relative-venv-path", edit("  ansible:\n", "  venv: {path: envs/x}\n  ansible:\n"),
         "venv:", "realize.venv.path", "not an absolute path"),
    case("relative-toolkit-prefix", edit("      source: apt", "      source: apt\n      prefix: cuda"),
         "prefix:", "cuda.toolkits[0].prefix", "not an absolute path"),
    # --- absurd sizes ---------------------------------------------------------------------------
    case("too-many-toolkits", edit('    - version: "12.8"\n      source: apt\n',
                                   "".join(f'    - version: "12.{i}"\n' for i in range(17))),
         "toolkits:", "cuda.toolkits", "17 entries is more than envmgr accepts", "at most 16",
         "split it over specs"),
    case("too-many-configs", edit("  configs:\n", "  configs:\n" + "".join(f"    c{i}: {{}}\n" for i in range(1000))),
         "configs:", "benchmarks.configs", "1001 entries", "at most 1000"),
    # --- apiVersion ---------------------------------------------------------------------------
    case("missing-apiVersion", edit("apiVersion: envmgr/v1\n", ""), 1, "apiVersion",
         "missing", "start the file with `apiVersion: envmgr/v1`"),
    case("wrong-apiVersion", edit("envmgr/v1", "envmgr/v2"), 1, "apiVersion",
         "unsupported version 'envmgr/v2'", "expected 'envmgr/v1'"),
    # --- unknown keys ---------------------------------------------------------------------------
    case("unknown-top-level-close", BASE + "benchmark: {}\n", "benchmark: {}", "benchmark",
         "unknown key 'benchmark'", "did you mean 'benchmarks'?"),
    case("unknown-top-level-far", BASE + "colour: red\n", "colour", "colour",
         "unknown key 'colour'", "expected one of: apiVersion, extends, kind, metadata"),
    case("unknown-depth-2", edit("  interconnect: pcie", "  interconect: pcie"), "interconect",
         "hardware.interconect", "unknown key 'interconect'", "did you mean 'interconnect'?"),
    case("unknown-depth-3", edit("segment:", "segmnt:"), "segmnt", "hardware.gpu.segmnt",
         "unknown key 'segmnt'", "expected one of: arch, count, model, segment, memory_gb",
         "did you mean 'segment'?"),
    case("unknown-in-list-item", edit("source: apt", "sorce: apt"), "sorce",
         "cuda.toolkits[0].sorce", "did you mean 'source'?"),
    case("unknown-in-named-config", edit("      flags:", "      flag:"), "flag:",
         "benchmarks.configs.baseline.flag", "did you mean 'flags'?"),
    case("unknown-depth-3-far", edit("input_len: 1024", "warm_up: 3"), "warm_up",
         "benchmarks.load.warm_up", "unknown key 'warm_up'", "expected one of: dataset"),
    case("renamed-required-key", edit("model_path:", "modelpath:"), "modelpath",
         "benchmarks.modelpath", "did you mean 'model_path'?", count=2),
    # --- required fields --------------------------------------------------------------------------
    case("missing-metadata-name", edit("  name: demo", "  description: no name"), "metadata:",
         "metadata.name", "required field is missing", "add `name:` under `metadata`",
         "expected short name of the environment"),
    case("missing-gpu-arch", edit("    arch: sm_90\n", ""), "  gpu:", "hardware.gpu.arch",
         "required field is missing", "add `arch:` under `hardware.gpu`"),
    case("missing-model-path", edit("  model_path: /models/m\n", ""), "benchmarks:",
         "benchmarks.model_path", "required field is missing", "local model directory"),
    case("missing-hardware", edit("hardware:\n  gpu:\n    arch: sm_90\n    count: 1\n"
                                  "    segment: datacenter\n  interconnect: pcie\n", ""), 1,
         "hardware", "required field is missing", "add `hardware:`"),
    case("null-section", edit("  gpu:\n    arch: sm_90\n    count: 1\n    segment: datacenter\n",
                              "  gpu:\n"), "gpu:", "hardware.gpu", "got null; expected a mapping"),
    case("section-is-list", edit("python:\n", "python: []\nx:\n"), "python: []", "python",
         "got an empty list; expected a mapping", count=2),
    # --- hardware -----------------------------------------------------------------------------
    case("bad-arch", edit("sm_90", "sm90"), "arch:", "hardware.gpu.arch",
         "got 'sm90'", "expected a GPU arch like sm_90"),
    case("count-0", edit("count: 1", "count: 0"), "count:", "hardware.gpu.count",
         "got 0; expected a number >= 1"),
    case("count-negative", edit("count: 1", "count: -8"), "count:", "hardware.gpu.count",
         "got -8; expected a number >= 1"),
    case("count-too-big", edit("count: 1", "count: 5000"), "count:", "hardware.gpu.count",
         "got 5000; expected a number <= 1024"),
    case("count-string", edit("count: 1", "count: eight"), "count:", "hardware.gpu.count",
         "got 'eight'; expected a whole number"),
    case("count-fraction", edit("count: 1", "count: 1.5"), "count:", "hardware.gpu.count",
         "got 1.5; expected a whole number"),
    case("memory-0", edit("count: 1", "count: 1\n    memory_gb: 0"), "memory_gb",
         "hardware.gpu.memory_gb", "got 0; expected a number > 0"),
    case("segment-typo", edit("segment: datacenter", "segment: workstaton"), "segment:",
         "hardware.gpu.segment", "got 'workstaton'",
         "expected 'datacenter', 'workstation', 'geforce' or 'embedded'",
         "did you mean 'workstation'?"),
    case("interconnect-unknown", edit("interconnect: pcie", "interconnect: infiniband"),
         "interconnect", "hardware.interconnect", "got 'infiniband'; expected 'pcie' or 'nvlink'"),
    case("interconnect-typo", edit("interconnect: pcie", "interconnect: nvlnk"), "interconnect",
         "hardware.interconnect", "did you mean 'nvlink'?"),
    # --- driver and CUDA ----------------------------------------------------------------------------
    case("driver-version-garbage", edit('"580.95.05"', '"580.x"'), "580.x", "driver.version",
         "'580.x' is not a version or PEP 440 specifier"),
    case("driver-version-unquoted", edit('"580.95.05"', "580.95"), "580.95", "driver.version",
         "got 580.95; expected a string", "put it in quotes"),
    case("driver-version-empty", edit('"580.95.05"', '""'), 'version: ""', "driver.version",
         "empty specifier"),
    case("driver-forward-compat-word", edit('"580.95.05"', '"580.95.05"\n  forward_compat: maybe'),
         "forward_compat", "driver.forward_compat", "got 'maybe'; expected true/false"),
    case("select-not-listed", edit('select: "12.8"', 'select: "13.0"'), "select:", "cuda.select",
         "'13.0' is not one of the toolkits ['12.8']"),
    case("duplicate-toolkits",
         edit("      source: apt\n", "      source: apt\n    - version: \"12.8\"\n"), "toolkits:",
         "cuda.toolkits", "toolkit versions repeat"),
    case("empty-toolkits", edit("  toolkits:\n    - version: \"12.8\"\n      source: apt\n",
                                "  toolkits: []\n"), "toolkits", "cuda.toolkits",
         "got an empty list; expected at least 1 item"),
    case("toolkit-version-float", edit('version: "12.8"', "version: 12.8"), "version: 12.8",
         "cuda.toolkits[0].version", "got 12.8; expected a string", "put it in quotes"),
    case("toolkit-version-word", edit('version: "12.8"', "version: twelve"), "twelve",
         "cuda.toolkits[0].version", "expected a CUDA version like 12.8"),
    case("toolkit-source", edit("source: apt", "source: conda"), "source:",
         "cuda.toolkits[0].source", "got 'conda'", "'apt', 'pip', 'runfile' or 'image'"),
    # --- sizes of versions: packaging's int() refuses numbers of over 4300 digits (issue 24) -------
    case("pin-huge", edit('"2.9.1"', f'"{HUGE}"'), "torch:", "python.packages.torch",
         "a version of 5,000 characters ('99999999999999999999'...)", "at most 64 characters",
         "write a version like 2.9.1"),
    case("pin-exact-huge", edit('"2.9.1"', f'"=={HUGE}"'), "torch:", "python.packages.torch",
         "a version of 5,000 characters"),
    case("pin-specifier-huge", edit('"2.9.1"', f'">=2.9,<{HUGE}"'), "torch:", "python.packages.torch",
         "a version of 5,000 characters"),
    case("pin-arbitrary-equality-long", edit('"2.9.1"', f'"==={"x" * 65}"'), "torch:",
         "python.packages.torch", "a version of 65 characters"),
    case("pin-release-number-11-digits", edit('"2.9.1"', '"2.99999999999"'), "torch:", "python.packages.torch",
         "'2.99999999999' has a release number of 11 digits", "at most 10 digits per number"),
    case("pin-specifier-long", edit('"2.9.1"', '"' + ",".join(["!=2.9.0"] * 40) + '"'), "torch:",
         "python.packages.torch", "a specifier of 319 characters", "at most 256 characters"),
    case("driver-specifier-huge", edit('"580.95.05"', f'">={HUGE}"'), ">=999", "driver.version",
         "a version of 5,000 characters", "or a specifier like '>=2.9,<2.10'"),
    case("toolkit-version-huge", edit('- version: "12.8"', f'- version: "12.{HUGE}"'), "- version",
         "cuda.toolkits[0].version", "a version of 5,003 characters", "write a CUDA version like 12.8"),
    case("select-release-number-11-digits", edit('select: "12.8"', 'select: "12.80000000000"'), "select:",
         "cuda.select", "has a release number of 11 digits"),
    case("flag-number-beyond-64-bits", edit("--tp-size: 1", f"--tp-size: {'9' * 400}"), "--tp-size",
         "benchmarks.server_flags.--tp-size", "a whole number of 400 digits", "64 bits"),
    case("base-image-too-long", edit("  ansible:\n", f"  docker: {{base_image: {'a' * 300}}}\n  ansible:\n"),
         "docker:", "realize.docker.base_image", "300 characters ('aaaa", "expected at most 255 characters"),
    # --- what the image's Dockerfile refuses (issue 24) ------------------------------------------------
    case("inherit-python-variable", edit('    torch: "2.9.1"\n', '    torch: "2.9.1"\n  inherit: '
                                         '{python: "/opt/$HOME/bin/python3", packages: [torch]}\n'),
         "inherit:", "python.inherit.python", "'$' is not allowed here", "read it as a variable"),
    # --- python -------------------------------------------------------------------------------
    case("python-2", edit('"3.12"', '"2.7"'), "2.7", "python.version",
         "got '2.7'; expected a Python version like 3.12"),
    case("python-version-float", edit('"3.12"', "3.10"), "3.10", "python.version",
         "got 3.1; expected a string", "put it in quotes"),
    case("torch-cuda-tag", edit("cu128", "cuda12.8"), "torch_cuda", "python.torch_cuda",
         "got 'cuda12.8'; expected a torch CUDA tag like cu128"),
    case("package-specifier", edit('"2.9.1"', '"=>2.9"'), "torch:", "python.packages.torch",
         "'=>2.9' is not a version or PEP 440 specifier", "'>=2.9,<2.10'"),
    case("package-specifier-float", edit('"2.9.1"', "2.9"), "torch:", "python.packages.torch",
         "got 2.9; expected a string", "put it in quotes"),
    case("package-name-space", edit('torch: "2.9.1"', '"torch cuda": "2.9.1"'), "torch cuda",
         "python.packages.torch cuda", "invalid name 'torch cuda'", "a Python package name"),
    case("package-name-dash", edit('torch: "2.9.1"', '-torch: "2.9.1"'), "-torch",
         "python.packages.-torch", "invalid name '-torch'"),
    case("packages-list", edit('    torch: "2.9.1"', '    - torch'), "packages:",
         "python.packages", "got a list; expected a mapping"),
    # --- env ----------------------------------------------------------------------------------
    case("env-name-digit", edit("CUDA_HOME:", "1CUDA_HOME:"), "1CUDA_HOME", "env.1CUDA_HOME",
         "invalid name '1CUDA_HOME'", "an environment variable name"),
    case("env-name-dash", edit("CUDA_HOME:", "CUDA-HOME:"), "CUDA-HOME", "env.CUDA-HOME",
         "invalid name 'CUDA-HOME'"),
    case("env-value-list", edit("/usr/local/cuda", "[a, b]"), "CUDA_HOME", "env.CUDA_HOME",
         "got a list; expected true/false, a number or a string"),
    case("env-value-null", edit(": /usr/local/cuda", ":"), "CUDA_HOME", "env.CUDA_HOME",
         "got null; expected true/false, a number or a string"),
    case("config-env-value-mapping", edit("NCCL_DEBUG: INFO", "NCCL_DEBUG: {level: INFO}"),
         "NCCL_DEBUG", "benchmarks.configs.baseline.env.NCCL_DEBUG",
         "got a mapping; expected true/false, a number or a string"),
    # --- probes, realize ------------------------------------------------------------------------------
    case("probes-both", edit("[symm_mem]", "[symm_mem, gpu]"), "expected_fail:", "probes.expected_fail",
         "probes both required and expected to fail: ['gpu']"),
    case("probe-name", edit("[gpu]", "[GPU check]"), "required:", "probes.required[0]",
         "got 'GPU check'; expected a lower-case name"),
    case("max-fail-percentage", edit("max_fail_percentage: 10", "max_fail_percentage: 150"),
         "max_fail", "realize.ansible.max_fail_percentage", "got 150; expected a number <= 100"),
    # --- benchmarks ---------------------------------------------------------------------------
    case("flag-without-dashes", edit("--tp-size:", "tp-size:"), "tp-size",
         "benchmarks.server_flags.tp-size", "invalid name 'tp-size'", "a long flag like --tp-size"),
    case("flag-upper-case", edit("--tp-size:", "--TP:"), "--TP", "benchmarks.server_flags.--TP",
         "invalid name '--TP'"),
    case("flag-value-list", edit("--tp-size: 1", "--tp-size: [1, 2]"), "--tp-size",
         "benchmarks.server_flags.--tp-size", "got a list; expected true/false, a number or a string"),
    case("flag-value-mapping", edit("--port: 30000", "--port: {value: 30000}"), "--port",
         "benchmarks.configs.baseline.flags.--port", "got a mapping; expected true/false"),
    case("config-name", edit("    baseline:", "    Base Line:"), "Base Line",
         "benchmarks.configs.Base Line", "invalid name 'Base Line'", "a lower-case name"),
    case("load-input-len-0", edit("input_len: 1024", "input_len: 0"), "input_len",
         "benchmarks.load.input_len", "got 0; expected a number >= 1"),
    # --- extends ------------------------------------------------------------------------------
    case("extends-missing-parent", {"main.yaml": child().replace("spec.yaml", "nope.yaml")},
         "extends:", "extends", "parent spec", "nope.yaml' not found", error=ExtendsError),
    case("extends-self", {"main.yaml": edit("metadata:", "extends: main.yaml\nmetadata:")},
         "extends:", "extends", "extends cycle", "main.yaml -> ", error=ExtendsError),
    case("extends-cycle", {"main.yaml": child().replace("spec.yaml", "b.yaml"),
                           "b.yaml": child().replace("spec.yaml", "main.yaml")},
         "extends:", "extends", "extends cycle", "main.yaml -> ", "b.yaml -> ",
         file="b.yaml", error=ExtendsError),
    case("extends-not-a-string", {"main.yaml": child().replace("spec.yaml", "[spec.yaml]"),
                                  "spec.yaml": BASE},
         "extends:", "extends", "got a list", "relative to this one", error=ExtendsError),
    case("extends-number", {"main.yaml": child().replace("spec.yaml", "5")},
         "extends:", "extends", "got 5", error=ExtendsError),
    case("extends-nul-byte", {"main.yaml": child().replace("spec.yaml", '"a\\0b"')},
         "extends:", "extends", "cannot use 'a\\x00b' as a path", error=ExtendsError),
    case("extends-name-too-long", {"main.yaml": child().replace("spec.yaml", "a" * 5000)},
         "extends:", "extends", "as a path", "too long", error=ExtendsError),
    case("extends-directory", {"main.yaml": child().replace("spec.yaml", ".")},
         "extends:", "extends", "not found", error=ExtendsError),
    case("extends-chain-too-long",
         {f"{'main' if i == 0 else i}.yaml": child().replace("spec.yaml", f"{i + 1}.yaml")
          for i in range(20)} | {"20.yaml": BASE},
         "extends:", "extends", "more than 16 levels of extends", file="15.yaml", error=ExtendsError),
    case("parent-bad-value", {"main.yaml": child("metadata: {name: child}"),
                              "spec.yaml": PARENT_COUNT_0},
         "count: 0", "hardware.gpu.count", "got 0", file="spec.yaml"),
    case("child-bad-value", {"main.yaml": child("hardware:", "  gpu:", "    count: 0"),
                             "spec.yaml": BASE},
         "count: 0", "hardware.gpu.count", "got 0"),
    case("child-fixes-parent", {"main.yaml": child("hardware: {gpu: {count: 2, segmnt: x}}"),
                                "spec.yaml": PARENT_COUNT_0},
         "hardware:", "hardware.gpu.segmnt", "did you mean 'segment'?"),
    case("child-unknown-key", {"main.yaml": child("pyton: {}"), "spec.yaml": BASE},
         "pyton", "pyton", "did you mean 'python'?"),
    case("child-replaces-list", {"main.yaml": child("cuda:", "  toolkits:", "    - source: pip"),
                                 "spec.yaml": BASE},
         "- source: pip", "cuda.toolkits[0].version", "required field is missing"),
    case("child-deletes-required", {"main.yaml": child("benchmarks:", "  model_path: null"),
                                    "spec.yaml": BASE},
         "benchmarks:", "benchmarks.model_path", "required field is missing"),
    case("parent-bad-yaml", {"main.yaml": child(), "spec.yaml": edit("[gpu]", "[gpu")},
         "expected_fail", "", "not valid YAML", file="spec.yaml"),
    case("grandparent-bad-value", {"main.yaml": child().replace("spec.yaml", "mid.yaml"),
                                   "mid.yaml": child("metadata: {name: mid}"),
                                   "spec.yaml": edit("cu128", "cu12")},
         "torch_cuda", "python.torch_cuda", "cu12", file="spec.yaml"),
]


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_malformed_spec(tmp_path: Path, c: Case) -> None:
    for name, text in c.files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    entry = "main.yaml" if "main.yaml" in c.files else next(iter(c.files))
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / entry)
    error = info.value
    assert isinstance(error, c.error)
    problems = error.problems
    assert len(problems) == c.count, error
    matching = [p for p in problems if p.field == c.field]
    assert len(matching) == 1, f"no single problem on {c.field!r}:\n{error}"
    problem = matching[0]
    assert Path(problem.file).name == c.file, error
    assert problem.line == _line(c.files.get(c.file, ""), c.line), error
    rendered = problem.render()
    for fragment in c.says:
        assert fragment in rendered
    assert problem.message


def _line(text: str, where: int | str | None) -> int | None:
    """``where`` as a line number: a fragment names the one line of ``text`` that has it."""
    if not isinstance(where, str):
        return where
    hits = [n for n, line in enumerate(text.splitlines(), 1) if where in line]
    assert len(hits) == 1, f"{where!r} is on lines {hits}"
    return hits[0]


def test_corpus_is_large_and_base_is_valid(tmp_path: Path) -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    (tmp_path / "base.yaml").write_text(BASE)
    assert load_spec(tmp_path / "base.yaml").spec.metadata.name == "demo"


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    text = edit("count: 1", "count: 0", "segment:", "segmnt:", '"2.9.1"', '"2.9.x"')
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "s.yaml")
    fields = [p.field for p in info.value.problems]
    assert fields == ["hardware.gpu.count", "hardware.gpu.segmnt", "python.packages.torch"]
    assert f"{tmp_path / 's.yaml'}:7: hardware.gpu.count: got 0; expected a number >= 1" in str(
        info.value)
    assert "invalid spec (3 problems)" in str(info.value)


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "absent.yaml")


# --- YAML features that are fine --------------------------------------------------------------

def test_anchors_aliases_and_merge_keys_load(tmp_path: Path) -> None:
    configs = textwrap.dedent("""\
          configs:
            common: &common
              description: shared
              flags: &flags {--port: 30000, --host: 127.0.0.1}
            fast:
              <<: *common
              description: overrides the merged one
              flags:
                <<: *flags
                --port: 30001
            both:
              <<: [*common, {description: loses to common}]
          load:
        """)
    (tmp_path / "s.yaml").write_text(BASE.split("  configs:\n")[0] + textwrap.indent(configs, "  ")
                                     + BASE.split("  load:\n")[1])
    loaded = load_spec(tmp_path / "s.yaml")
    configs = loaded.spec.benchmarks.configs
    assert configs["fast"].description == "overrides the merged one"
    assert configs["fast"].flags == {"--port": 30001, "--host": "127.0.0.1"}
    assert configs["both"].description == "shared"
    assert configs["both"].flags == configs["common"].flags
    assert loaded.locate(("benchmarks", "configs", "fast", "flags", "--host")).endswith(":37")


# --- extends: merge semantics -----------------------------------------------------------------

def test_extends_merge_semantics(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(edit('torch: "2.9.1"', 'torch: "2.9.1"\n    numpy: "2.1"'))
    (tmp_path / "main.yaml").write_text(child(
        "metadata: {name: child}",
        "python:",
        "  packages:",
        "    numpy: null",            # null deletes the parent's key
        '    sglang: "0.5.9"',        # maps merge: torch stays
        "probes:",
        "  required: []",             # lists replace, even with an empty list
        "cuda:",
        "  toolkits: [{version: '13.0'}]",
        "  select: null",
    ))
    loaded = load_spec(tmp_path / "main.yaml")
    spec = loaded.spec
    assert spec.metadata.name == "child"
    assert spec.python.packages == {"torch": "==2.9.1", "sglang": "==0.5.9"}
    assert spec.probes.required == [] and spec.probes.expected_fail == ["symm_mem"]
    assert [t.version for t in spec.cuda.toolkits] == ["13.0"] and spec.cuda.select is None
    assert spec.hardware.gpu.arch == "sm_90"
    assert [p.name for p in loaded.chain] == ["main.yaml", "spec.yaml"]
    assert loaded.locate(("python", "packages", "sglang")) == f"{tmp_path / 'main.yaml'}:7"
    assert loaded.locate(("python", "packages", "torch")) == f"{tmp_path / 'spec.yaml'}:21"
    assert loaded.locate(("cuda", "toolkits", 0, "version")) == f"{tmp_path / 'main.yaml'}:11"


def test_real_cuda13_extends_cuda128() -> None:
    loaded = load_spec(SPECS / "cuda13.yaml")
    spec = loaded.spec
    assert [p.name for p in loaded.chain] == ["cuda13.yaml", "cuda128.yaml"]
    assert "sgl-kernel" not in spec.python.packages and "sglang-kernel" in spec.python.packages
    assert spec.python.packages["torch"] == "==2.11.0"
    assert [t.version for t in spec.cuda.toolkits] == ["12.8", "13.0"]
    assert spec.probes.expected_fail == []
    assert spec.hardware.gpu.count == 8  # inherited
    assert {"baseline", "allreduce_fusion"} <= set(spec.benchmarks.configs)
    assert loaded.locate(("hardware", "gpu", "count")).startswith(str(SPECS / "cuda128.yaml"))
    assert loaded.locate(("driver", "version")).startswith(str(SPECS / "cuda13.yaml"))


def test_deep_merge_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    over = {"a": {"b": None, "c": [2]}, "e": {"f": 1}}
    assert deep_merge(base, over) == {"a": {"c": [2]}, "d": 1, "e": {"f": 1}}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}
    assert over == {"a": {"b": None, "c": [2]}, "e": {"f": 1}}


# --- digest -----------------------------------------------------------------------------------

def _digest(tmp_path: Path, text: str, name: str = "d.yaml") -> str:
    (tmp_path / name).write_text(text)
    return load_spec(tmp_path / name).digest


def test_digest_ignores_comments_order_and_layout(tmp_path: Path) -> None:
    base = _digest(tmp_path, BASE)
    commented = "# a comment\n" + BASE.replace("count: 1", "count: 1   # one GPU")
    reordered = edit("hardware:", "probes: {required: [gpu], expected_fail: [symm_mem]}\nhardware:",
                     "probes:\n  required: [gpu]\n  expected_fail: [symm_mem]\n", "")
    flow = edit("  toolkits:\n    - version: \"12.8\"\n      source: apt\n",
                "  toolkits: [{source: apt, version: '12.8'}]\n")
    exact_pin = edit('"2.9.1"', '"==2.9.1"')  # a bare version means an exact pin
    for text in (commented, reordered, flow, exact_pin):
        assert _digest(tmp_path, text) == base


def test_digest_changes_with_a_value(tmp_path: Path) -> None:
    base = _digest(tmp_path, BASE)
    assert _digest(tmp_path, edit("count: 1", "count: 2")) != base
    assert _digest(tmp_path, edit('"2.9.1"', '">=2.9.1"')) != base
    assert _digest(tmp_path, edit("/usr/local/cuda", "/usr/local/cuda\n  X: 1")) != base


def test_digest_of_a_child_equals_the_flat_spec(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(BASE)
    (tmp_path / "main.yaml").write_text(child("hardware: {gpu: {count: 2}}"))
    flat = edit("count: 1", "count: 2")
    assert load_spec(tmp_path / "main.yaml").digest == _digest(tmp_path, flat, "flat.yaml")


@pytest.mark.parametrize("field, value, expected", [
    ("count", "true", "got true; expected a whole number"),
    ("memory_gb", "true", "got true; expected a number"),
    ("count", '"8"', "got '8'; expected a whole number"),
])
def test_numbers_are_not_coerced_from_booleans_or_strings(tmp_path, field, value, expected):
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: envmgr/v1\nmetadata: {name: s}\nhardware:\n  gpu:\n"
                    f"    arch: sm_90\n    {field}: {value}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert (problem.line, problem.field) == (6, f"hardware.gpu.{field}")
    assert expected in problem.render()


def test_a_file_far_bigger_than_any_spec_is_refused_unread(tmp_path: Path) -> None:
    from envmgr.spec.source import MAX_BYTES

    big = tmp_path / "big.yaml"
    big.write_text(BASE + "# " + "x" * MAX_BYTES + "\n")
    with pytest.raises(SpecError) as info:
        load_spec(big)
    (problem,) = info.value.problems
    assert "bytes; envmgr reads specs up to" in problem.message and problem.fix


def test_extends_never_shows_a_file_that_is_not_a_spec(tmp_path: Path) -> None:
    secret = tmp_path / "secrets.txt"
    secret.write_text("root:$6$hash:19000:0:99999:7:::\nadmin: hunter2\n")
    (tmp_path / "main.yaml").write_text(BASE.replace("metadata:", f"extends: {secret}\nmetadata:", 1))
    with pytest.raises(ExtendsError) as info:
        load_spec(tmp_path / "main.yaml")
    text = str(info.value)
    assert "is not an envmgr spec" in text and "main.yaml:2" in text
    assert "hunter2" not in text and "$6$" not in text and "19000" not in text


def test_extends_through_a_symlink_loop_is_located(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    (tmp_path / "main.yaml").write_text(child("metadata: {name: x}").replace("spec.yaml", "a.yaml"))
    with pytest.raises(ExtendsError) as info:
        load_spec(tmp_path / "main.yaml")
    (problem,) = info.value.problems
    assert problem.line == 2 and problem.field == "extends" and "cannot use 'a.yaml' as a path" in problem.message


def test_a_key_with_a_newline_is_shown_escaped_one_problem_per_line(tmp_path: Path) -> None:
    """hypothesis found it (test_spec_property): a YAML complex key "A\\n" printed its newline raw."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + "? 'A\n\n  '\n: Environment\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    [problem] = caught.value.problems
    assert problem.field == "A\n"  # the data keeps the key as written
    rendered = problem.render()
    assert "\n" not in rendered and rendered.startswith(f"{spec}:{len(BASE.splitlines()) + 1}: A\\n: unknown key")
