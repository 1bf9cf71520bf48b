"""Collect the facts of a target: constant commands run through a ``Runner``, parsed by
the pure functions of ``envmgr.facts.parsers``.

Every command is a constant argv list; the shell scripts are constants too and take
their only inputs as positional arguments (``sh -c SCRIPT sh ARG``), never as text
pasted into the script. A command that is missing, times out or fails leaves its fact
empty and says why in ``Facts.missing[field]``: collecting never fails because a
target lacks a driver or a toolkit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from envmgr.errors import BackendError, CommandNotFound, CommandTimeout, FactsError
from envmgr.facts.model import JIT_NVCC_ORDER, CompilerFact, Facts, ToolkitFact
from envmgr.facts.parsers import (
    NVIDIA_SMI_QUERY_FIELDS,
    parse_cuda_version_from_smi,
    parse_env,
    parse_kernel_module,
    parse_nvcc_version,
    parse_nvidia_smi_error,
    parse_nvidia_smi_query,
    parse_pip_cuda_tools,
    parse_python_info,
    parse_toolkit_listing,
)
from envmgr.targets.base import CommandResult, Runner

COMMAND_TIMEOUT_S = 30.0  # nvidia-smi can hang on a GPU that fell off the bus
CUDA_ROOT = "/usr/local"  # where CUDA installers put cuda, cuda-12.8, cuda-13.0 ...

NVIDIA_SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=" + ",".join(NVIDIA_SMI_QUERY_FIELDS),
    "--format=csv,noheader,nounits",
]
NVIDIA_SMI_BANNER = ["nvidia-smi"]  # only the banner carries 'CUDA Version: X.Y'
ENV_DUMP = ["env", "-0"]  # NUL-separated: values may contain newlines
NVRM_VERSION = ["cat", "/proc/driver/nvidia/version"]  # which kernel module is loaded

# $1 = the CUDA root (/usr/local). Prints where $1/cuda points, then one line per toolkit
# directory (resolved, so cuda-13 -> cuda-13.0 appears under its real name) with the
# version from version.json (CUDA >= 11.1) or version.txt (older).
TOOLKIT_LISTING_SCRIPT = r"""
root=$1
if [ -L "$root/cuda" ]; then printf 'link\t%s\n' "$(readlink -f "$root/cuda")"; fi
for entry in "$root/cuda" "$root"/cuda-*; do
  [ -d "$entry" ] || continue
  dir=$(readlink -f "$entry")
  version=
  if [ -f "$dir/version.json" ]; then
    version=$(sed -n '/"cuda" *:/,/}/ s/.*"version" *: *"\([^"]*\)".*/\1/p' "$dir/version.json" | head -n 1)
  elif [ -f "$dir/version.txt" ]; then
    version=$(sed -n 's/^CUDA Version \([0-9.]*\).*/\1/p' "$dir/version.txt" | head -n 1)
  fi
  printf 'toolkit\t%s\t%s\n' "$dir" "$version"
done
exit 0
"""

# $1 = the CUDA root. Prints 'kind<TAB>origin<TAB>path' for each nvcc/ptxas reachable the
# ways FlashInfer's JIT looks for nvcc (FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH, PATH,
# /usr/local/cuda), then every installed toolkit under its real name, like the toolkit
# listing (cuda-13 -> cuda-13.0 once). Pip wheels are found by the python info.
COMPILER_SEARCH_SCRIPT = r"""
root=$1
found() { [ -n "$3" ] && [ -f "$3" ] && [ -x "$3" ] && printf '%s\t%s\t%s\n' "$1" "$2" "$3"; }
in_bin() { found nvcc "$1" "$2/nvcc"; found ptxas "$1" "$2/ptxas"; }
[ -n "$FLASHINFER_NVCC" ] && found nvcc FLASHINFER_NVCC "$(command -v "$FLASHINFER_NVCC")"
[ -n "$CUDA_HOME" ] && in_bin CUDA_HOME "$CUDA_HOME/bin"
[ -n "$CUDA_PATH" ] && in_bin CUDA_PATH "$CUDA_PATH/bin"
found nvcc PATH "$(command -v nvcc)"
found ptxas PATH "$(command -v ptxas)"
in_bin /usr/local/cuda "$root/cuda/bin"
for dir in "$root"/cuda-*; do [ -d "$dir" ] && in_bin toolkit "$(readlink -f "$dir")/bin"; done
exit 0
"""

# Run by the target's own interpreter; stdlib only, Python >= 3.8. Prints one JSON object.
# cuda_tools: nvcc/ptxas files listed in the RECORD of nvidia-cuda-nvcc* wheels, so the
# package is known exactly (nvidia/cuda_nvcc/ is shared by the -cu11 and -cu12 wheels).
PYTHON_INFO_SCRIPT = r"""
import sys
sys.path[:] = [p for p in sys.path if p]  # never import from the working directory
import importlib.metadata as metadata, json, os, platform, re, site

packages, cuda_tools = {}, []
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name or name in packages:
        continue  # broken metadata, or shadowed by an earlier sys.path entry
    packages[name] = dist.version
    if re.sub(r"[-_.]+", "-", name).lower().startswith("nvidia-cuda-nvcc"):
        for file in dist.files or ():
            if file.name in ("nvcc", "ptxas") and file.parent.name == "bin":
                path = os.path.normpath(str(dist.locate_file(file)))
                cuda_tools.append({"kind": file.name, "path": path, "package": name})
site_packages = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print(json.dumps({
    "executable": sys.executable,
    "version": platform.python_version(),
    "packages": packages,
    "site_packages": site_packages,
    "cuda_tools": cuda_tools,
}))
"""

NVIDIA_SMI_NOT_FOUND = "nvidia-smi not found: no NVIDIA driver on this target"


def toolkit_listing_argv(cuda_root: str = CUDA_ROOT) -> list[str]:
    return ["sh", "-c", TOOLKIT_LISTING_SCRIPT, "sh", cuda_root]


def compiler_search_argv(cuda_root: str = CUDA_ROOT) -> list[str]:
    return ["sh", "-c", COMPILER_SEARCH_SCRIPT, "sh", cuda_root]


def python_info_argv(python: str, isolated: bool = False) -> list[str]:
    """``isolated``: the interpreter's own packages only (``-I``: no PYTHONPATH, no user site),
    what an environment has whatever shell it is asked from."""
    return [python, *(["-I"] if isolated else []), "-c", PYTHON_INFO_SCRIPT]


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """A command's result, or why there is none (missing program, timeout, exit status)."""

    result: CommandResult | None
    failure: str | None = None
    program_missing: bool = False

    @property
    def stdout(self) -> str:
        return self.result.stdout if self.result else ""

    @property
    def output(self) -> str:
        return (self.result.stdout + self.result.stderr) if self.result else ""


def attempt(runner: Runner, argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S) -> Attempt:
    """Run ``argv``; a failure becomes a reason string instead of an exception."""
    try:
        result = runner.run(argv, timeout=timeout)
    except CommandNotFound:
        return Attempt(None, f"{argv[0]} not found", program_missing=True)
    except CommandTimeout:
        return Attempt(None, f"{argv[0]} timed out after {timeout:g}s")
    except BackendError as exc:
        return Attempt(None, f"{argv[0]} could not run: {exc.message}")
    if not result.ok:
        return Attempt(result, f"{argv[0]} exited with status {result.returncode}: {_tail(result)}")
    return Attempt(result)


def _tail(result: CommandResult) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1][:200] if lines else "no output"


# --- collecting ---------------------------------------------------------------------------

Fields = dict[str, Any]  # Facts field name -> value
Missing = dict[str, str]  # Facts field name -> why it is absent


def collect_facts(runner: Runner, python: str = "python3", cuda_root: str = CUDA_ROOT,
                  isolated: bool = False) -> Facts:
    """What ``runner``'s target has now. Never raises for what the target lacks. ``isolated``:
    the Python's packages without what PYTHONPATH or the user site adds (``python_info_argv``)."""
    commands = {
        "nvidia_smi_query": NVIDIA_SMI_QUERY,
        "nvidia_smi_banner": NVIDIA_SMI_BANNER,
        "toolkits": toolkit_listing_argv(cuda_root),
        "compilers": compiler_search_argv(cuda_root),
        "python": python_info_argv(python, isolated),
        "env": ENV_DUMP,
        "kernel_module": NVRM_VERSION,
    }
    attempts = _attempt_all(runner, commands)

    fields: Fields = {}
    missing: Missing = {}
    for part_fields, part_missing in (
        _driver_facts(attempts["nvidia_smi_query"], attempts["nvidia_smi_banner"]),
        _toolkit_facts(attempts["toolkits"]),
        _python_facts(attempts["python"]),
        _env_facts(attempts["env"]),
        _kernel_module_facts(attempts["kernel_module"]),
        _compiler_facts(runner, attempts["compilers"], attempts["python"]),
    ):
        fields.update(part_fields)
        missing.update(part_missing)
    compilers = fields.get("compilers", [])
    system = _versions_from_nvcc(fields.get("toolkits", []), compilers)
    fields["toolkits"] = system + _pip_toolkits(compilers)
    return Facts(**fields, missing=missing)


def _versions_from_nvcc(toolkits: list[ToolkitFact], compilers: list[CompilerFact]) -> list[ToolkitFact]:
    """A toolkit without version.json (some images drop it) takes its own nvcc's version."""
    by_prefix = {c.path.rsplit("/bin/", 1)[0]: c.version for c in compilers if c.kind == "nvcc"}
    return [t if t.version else t.model_copy(update={"version": by_prefix.get(t.path.rstrip("/"))})
            for t in toolkits]


def _attempt_all(runner: Runner, commands: dict[str, list[str]]) -> dict[str, Attempt]:
    """The independent commands at once: collecting costs the slowest, not the sum."""
    with ThreadPoolExecutor(max_workers=max(1, len(commands))) as pool:
        futures = {key: pool.submit(attempt, runner, argv) for key, argv in commands.items()}
        return {key: future.result() for key, future in futures.items()}


def _driver_facts(query: Attempt, banner: Attempt) -> tuple[Fields, Missing]:
    names = ("driver_version", "gpus", "cuda_driver_version")
    if query.failure:
        if query.program_missing:
            return {}, dict.fromkeys(names, NVIDIA_SMI_NOT_FOUND)
        nvml_error = parse_nvidia_smi_error(query.output)
        reason = f"nvidia-smi failed: {nvml_error}" if nvml_error else query.failure
        return {"nvml_error": nvml_error}, dict.fromkeys(names, reason)

    fields: Fields = {}
    missing: Missing = {}
    try:
        fields["driver_version"], fields["gpus"] = parse_nvidia_smi_query(query.stdout)
    except FactsError as exc:
        missing.update(driver_version=exc.message, gpus=exc.message)
    cuda = parse_cuda_version_from_smi(banner.stdout) if not banner.failure else None
    if cuda:
        fields["cuda_driver_version"] = cuda
    else:
        missing["cuda_driver_version"] = banner.failure or "no 'CUDA Version' in the nvidia-smi banner"
    return fields, missing


def _toolkit_facts(listing: Attempt) -> tuple[Fields, Missing]:
    if listing.failure:
        return {}, {"toolkits": listing.failure, "cuda_link": listing.failure}
    try:
        toolkits, link = parse_toolkit_listing(listing.stdout)
    except FactsError as exc:
        return {}, {"toolkits": exc.message, "cuda_link": exc.message}
    return {"toolkits": toolkits, "cuda_link": link}, {}


def _python_facts(info: Attempt) -> tuple[Fields, Missing]:
    return _parsed("python", info, parse_python_info)


def _kernel_module_facts(nvrm: Attempt) -> tuple[Fields, Missing]:
    if nvrm.failure:
        return {}, {"kernel_module": "no /proc/driver/nvidia/version: the NVIDIA kernel module is not loaded here"}
    flavour = parse_kernel_module(nvrm.stdout)
    if flavour is None:
        return {}, {"kernel_module": "no 'NVRM version' line in /proc/driver/nvidia/version"}
    return {"kernel_module": flavour}, {}


def _env_facts(dump: Attempt) -> tuple[Fields, Missing]:
    return _parsed("env", dump, parse_env)


def _parsed(field: str, source: Attempt, parse: Callable[[str], Any]) -> tuple[Fields, Missing]:
    if source.failure:
        return {}, {field: source.failure}
    try:
        return {field: parse(source.stdout)}, {}
    except FactsError as exc:
        return {}, {field: exc.message}


@dataclass(frozen=True)
class _Candidate:
    kind: str
    origin: str
    path: str


def _compiler_facts(runner: Runner, search: Attempt, python_info: Attempt) -> tuple[Fields, Missing]:
    """Every nvcc/ptxas found, each with what its own ``--version`` says."""
    missing: Missing = {}
    candidates: list[_Candidate] = []
    if search.failure:
        missing["compilers"] = search.failure
    else:
        candidates += _search_candidates(search.stdout)
    if not python_info.failure:
        try:
            candidates += [
                _Candidate(tool.kind, f"pip:{tool.package}", tool.path)
                for tool in parse_pip_cuda_tools(python_info.stdout)
            ]
        except FactsError:
            pass  # already recorded as missing['python']

    paths = list(dict.fromkeys(c.path for c in candidates))  # run each binary once
    versions = _attempt_all(runner, {path: [path, "--version"] for path in paths})
    compilers: list[CompilerFact] = []
    for candidate in dict.fromkeys(candidates):  # the same (kind, origin, path) once
        try:
            version, release = _compiler_version(versions[candidate.path])
        except FactsError as exc:
            missing[f"compilers:{candidate.path}"] = exc.message
            continue
        compilers.append(
            CompilerFact(
                path=candidate.path,
                kind=candidate.kind,  # 'nvcc' | 'ptxas' by construction
                version=version,
                release=release,
                origin=candidate.origin,
            )
        )
    return {"compilers": compilers}, missing


def first_jit_nvcc(search_output: str) -> str | None:
    """The nvcc FlashInfer's JIT would use, from COMPILER_SEARCH_SCRIPT's output."""
    found = {c.origin: c.path for c in reversed(_search_candidates(search_output)) if c.kind == "nvcc"}
    return next((found[o] for o in JIT_NVCC_ORDER if o in found), None)


def _search_candidates(text: str) -> list[_Candidate]:
    candidates = []
    for line in text.splitlines():
        kind, origin, path = (line.split("\t") + ["", ""])[:3]
        if kind in ("nvcc", "ptxas") and origin and path:
            candidates.append(_Candidate(kind, origin, path))
    return candidates


def _compiler_version(run: Attempt) -> tuple[str, str]:
    if run.failure:
        raise FactsError(run.failure)
    return parse_nvcc_version(run.stdout)


def _pip_toolkits(compilers: list[CompilerFact]) -> list[ToolkitFact]:
    """A pip wheel with a full nvcc is a toolkit too (prefix = the directory above bin/)."""
    prefixes: dict[str, ToolkitFact] = {}
    for compiler in compilers:
        if compiler.kind == "nvcc" and compiler.origin.startswith("pip:"):
            prefix = compiler.path.rsplit("/bin/", 1)[0]
            prefixes.setdefault(prefix, ToolkitFact(path=prefix, version=compiler.version, source="pip"))
    return list(prefixes.values())
