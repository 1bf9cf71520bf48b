"""collect_facts: for real on this machine (no GPU, no driver), on fake CUDA trees and a
venv holding the real nvcc wheels, and through a recorded-output runner for GPU hosts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pydantic
import pytest

from envmgr.errors import CommandNotFound, CommandTimeout
from envmgr.facts import Facts, collect_facts
from envmgr.facts.collect import (
    ENV_DUMP,
    NVIDIA_SMI_BANNER,
    NVIDIA_SMI_NOT_FOUND,
    NVIDIA_SMI_QUERY,
    NVRM_VERSION,
    compiler_search_argv,
    python_info_argv,
    toolkit_listing_argv,
)
from envmgr.facts.model import CompilerFact, GpuFact, ToolkitFact
from envmgr.targets.base import CommandResult
from envmgr.targets.local import LocalTarget

FIXTURES = Path(__file__).parent.parent / "fixtures" / "facts"
WHEELS = Path("/tmp/nv")
NVCC_13_WHEEL = "nvidia_cuda_nvcc-13.0.88-*.whl"
NVCC_CU12_WHEEL = "nvidia_cuda_nvcc_cu12-12.8.93-*.whl"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class WithEnv:
    """A runner that adds variables to every command: the target's environment."""

    def __init__(self, runner: LocalTarget, env: Mapping[str, str]) -> None:
        self.runner, self.env = runner, dict(env)

    def run(self, argv: Sequence[str], timeout: float = 60.0, env: Mapping[str, str] | None = None):
        return self.runner.run(argv, timeout=timeout, env={**self.env, **(env or {})})


# --- this machine, for real ---------------------------------------------------------------

no_driver_here = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None, reason="this test describes a host without an NVIDIA driver"
)


@no_driver_here
def test_this_machine_has_no_gpu_and_says_why():
    facts = collect_facts(LocalTarget(), python=sys.executable)
    assert facts.gpus == []
    assert facts.driver_version is None and facts.cuda_driver_version is None
    assert facts.nvml_error is None  # no driver is not an NVML failure
    for field in ("gpus", "driver_version", "cuda_driver_version"):
        assert facts.missing[field] == NVIDIA_SMI_NOT_FOUND


def test_this_machine_python_and_env():
    facts = collect_facts(LocalTarget(), python=sys.executable)
    assert facts.python is not None
    assert facts.python.version == ".".join(map(str, sys.version_info[:3]))
    assert facts.python.packages["pydantic"] == pydantic.VERSION
    assert facts.python.packages["pytest"] == pytest.__version__
    assert facts.env["PATH"] == os.environ["PATH"]
    assert "HOME" not in facts.env
    assert "python" not in facts.missing and "env" not in facts.missing


@pytest.mark.skipif(
    any(Path("/usr/local").glob("cuda*")) or shutil.which("nvcc"), reason="this host has a CUDA toolkit"
)
def test_this_machine_has_no_toolkit_and_no_compiler():
    facts = collect_facts(LocalTarget(), python=sys.executable)
    assert (facts.toolkits, facts.cuda_link, facts.compilers) == ([], None, [])
    assert facts.jit_nvcc() is None
    assert "toolkits" not in facts.missing and "compilers" not in facts.missing  # absent, not unknown


def test_missing_python_is_recorded_not_raised():
    facts = collect_facts(LocalTarget(), python="no-such-python-xyz")
    assert facts.python is None
    assert facts.missing["python"] == "no-such-python-xyz not found"
    assert facts.env  # the other facts are still there


def test_facts_round_trip_as_json():
    facts = collect_facts(LocalTarget(), python=sys.executable)
    assert Facts.model_validate_json(facts.model_dump_json()) == facts


# --- fake CUDA trees under a temporary root -----------------------------------------------

VERSION_JSON = """{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "%s"
   },
   "cuda_cccl" : {
      "name" : "CUDA C++ Core Compute Libraries",
      "version" : "99.9.99"
   }
}
"""


def fake_tool(path: Path, recorded_output: str) -> Path:
    """An executable that prints a recorded ``--version`` output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat '{FIXTURES / recorded_output}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def cuda_root(tmp_path: Path) -> Path:
    """cuda -> cuda-13.0, cuda-13 -> cuda-13.0, cuda-12.8, and a bare cuda-11.0 (version.txt)."""
    root = tmp_path / "usr-local"
    (root / "cuda-13.0").mkdir(parents=True)
    (root / "cuda-13.0" / "version.json").write_text(VERSION_JSON % "13.0.2")
    fake_tool(root / "cuda-13.0" / "bin" / "nvcc", "nvcc_version_13.0.88_pip.txt")
    fake_tool(root / "cuda-13.0" / "bin" / "ptxas", "ptxas_version_13.0.88_pip.txt")
    (root / "cuda-12.8").mkdir()
    (root / "cuda-12.8" / "version.json").write_text(VERSION_JSON % "12.8.1")
    # The 12.8 nvcc prints the same 'release 12.8, V12.8.93' line as the recorded 12.8 ptxas.
    fake_tool(root / "cuda-12.8" / "bin" / "nvcc", "ptxas_version_12.8.93_pip_cu12.txt")
    (root / "cuda-11.0").mkdir()
    (root / "cuda-11.0" / "version.txt").write_text("CUDA Version 11.0.228\n")
    (root / "cuda").symlink_to(root / "cuda-13.0")
    (root / "cuda-13").symlink_to(root / "cuda-13.0")
    return root


def test_toolkit_listing_script_on_a_fake_root(cuda_root: Path):
    facts = collect_facts(LocalTarget(), python=sys.executable, cuda_root=str(cuda_root))
    assert facts.cuda_link == str(cuda_root / "cuda-13.0")
    assert facts.toolkits == [
        ToolkitFact(path=str(cuda_root / "cuda-13.0"), version="13.0.2"),
        ToolkitFact(path=str(cuda_root / "cuda-11.0"), version="11.0.228"),
        ToolkitFact(path=str(cuda_root / "cuda-12.8"), version="12.8.1"),
    ]


def test_toolkit_without_version_json_takes_its_nvcc_version(cuda_root: Path):
    # seen on the H200 image: /usr/local/cuda-13.0 has no version.json (docs/evidence/h200-facts/)
    (cuda_root / "cuda-13.0" / "version.json").unlink()
    facts = collect_facts(LocalTarget(), python=sys.executable, cuda_root=str(cuda_root))
    (toolkit,) = [t for t in facts.toolkits if t.path.endswith("cuda-13.0")]
    assert toolkit.version == "13.0.88"


def test_compilers_found_the_ways_flashinfer_looks(cuda_root: Path):
    # CUDA_HOME names 12.8 while PATH and /usr/local/cuda give 13.0: FlashInfer's JIT takes
    # CUDA_HOME first (the flashinfer#5145 situation), and the facts must show both.
    runner = WithEnv(
        LocalTarget(),
        {"CUDA_HOME": str(cuda_root / "cuda-12.8"), "PATH": f"{cuda_root / 'cuda-13' / 'bin'}:/usr/bin:/bin"},
    )
    facts = collect_facts(runner, python=sys.executable, cuda_root=str(cuda_root))
    found = [(c.origin, c.kind, c.path.removeprefix(str(cuda_root)), c.version) for c in facts.compilers]
    assert found == [
        ("CUDA_HOME", "nvcc", "/cuda-12.8/bin/nvcc", "12.8.93"),
        ("PATH", "nvcc", "/cuda-13/bin/nvcc", "13.0.88"),
        ("PATH", "ptxas", "/cuda-13/bin/ptxas", "13.0.88"),
        ("/usr/local/cuda", "nvcc", "/cuda/bin/nvcc", "13.0.88"),
        ("/usr/local/cuda", "ptxas", "/cuda/bin/ptxas", "13.0.88"),
        ("toolkit", "nvcc", "/cuda-12.8/bin/nvcc", "12.8.93"),
        ("toolkit", "nvcc", "/cuda-13.0/bin/nvcc", "13.0.88"),
        ("toolkit", "ptxas", "/cuda-13.0/bin/ptxas", "13.0.88"),
    ]  # cuda-13 is a link to cuda-13.0: listed once, under its real name
    jit = facts.jit_nvcc()
    assert jit is not None and (jit.origin, jit.release) == ("CUDA_HOME", "12.8")


def test_flashinfer_nvcc_may_be_a_bare_name_on_path(cuda_root: Path):
    runner = WithEnv(LocalTarget(), {"FLASHINFER_NVCC": "nvcc", "PATH": f"{cuda_root / 'cuda-12.8' / 'bin'}:/bin"})
    facts = collect_facts(runner, python=sys.executable, cuda_root=str(cuda_root))
    jit = facts.jit_nvcc()
    assert jit is not None
    assert (jit.origin, jit.path, jit.version) == ("FLASHINFER_NVCC", str(cuda_root / "cuda-12.8/bin/nvcc"), "12.8.93")


def test_a_compiler_that_fails_is_recorded_in_missing(cuda_root: Path):
    broken = cuda_root / "cuda-13.0" / "bin" / "nvcc"
    broken.write_text("#!/bin/sh\necho 'nvcc: error while loading shared libraries' >&2\nexit 127\n")
    facts = collect_facts(LocalTarget(), python=sys.executable, cuda_root=str(cuda_root))
    assert all(c.release != "13.0" or c.kind == "ptxas" for c in facts.compilers)
    assert "exited with status 127: nvcc: error while loading shared libraries" in facts.missing[
        f"compilers:{broken}"
    ]


# --- a venv holding the real nvcc wheels --------------------------------------------------


@pytest.fixture(scope="module")
def nvcc_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = sorted(WHEELS.glob(NVCC_13_WHEEL)) + sorted(WHEELS.glob(NVCC_CU12_WHEEL))
    if len(wheels) != 2:
        pytest.skip(f"needs {NVCC_13_WHEEL} and {NVCC_CU12_WHEEL} in {WHEELS} (pip download --no-deps)")
    venv = tmp_path_factory.mktemp("nvcc-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", purelib, *wheels],
        check=True, capture_output=True,
    )  # fmt: skip
    return venv


def test_pip_nvcc_wheels_are_found_with_their_package(nvcc_venv: Path):
    facts = collect_facts(LocalTarget(), python=str(nvcc_venv / "bin" / "python"))
    pip_compilers = sorted(
        (c.origin, c.kind, c.version, c.release, c.path.split("site-packages/")[1])
        for c in facts.compilers
        if c.origin.startswith("pip:")
    )
    assert pip_compilers == [
        ("pip:nvidia-cuda-nvcc", "nvcc", "13.0.88", "13.0", "nvidia/cu13/bin/nvcc"),
        ("pip:nvidia-cuda-nvcc", "ptxas", "13.0.88", "13.0", "nvidia/cu13/bin/ptxas"),
        ("pip:nvidia-cuda-nvcc-cu12", "ptxas", "12.8.93", "12.8", "nvidia/cuda_nvcc/bin/ptxas"),
    ]
    assert facts.python is not None
    assert facts.python.packages == {"nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-nvcc-cu12": "12.8.93"}
    # The wheel with a full nvcc is a toolkit; the ptxas-only -cu12 wheel is not.
    pip_toolkits = [t for t in facts.toolkits if t.source == "pip"]
    assert [(t.path.split("site-packages/")[1], t.version) for t in pip_toolkits] == [("nvidia/cu13", "13.0.88")]
    # FlashInfer's JIT does not look inside site-packages: a pip nvcc alone is not used.
    if not shutil.which("nvcc"):
        assert facts.jit_nvcc() is None


def test_pip_nvcc_used_through_cuda_home(nvcc_venv: Path):
    python = nvcc_venv / "bin" / "python"
    probe = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    prefix = Path(subprocess.run(probe, check=True, capture_output=True, text=True).stdout.strip(), "nvidia", "cu13")
    facts = collect_facts(WithEnv(LocalTarget(), {"CUDA_HOME": str(prefix)}), python=str(python))
    jit = facts.jit_nvcc()
    assert jit == CompilerFact(
        path=str(prefix / "bin" / "nvcc"), kind="nvcc", version="13.0.88", release="13.0", origin="CUDA_HOME"
    )


# --- GPU hosts, through recorded outputs --------------------------------------------------


class RecordedRunner:
    """Answers each known argv with a recorded result (or raises); anything else is not found."""

    def __init__(self, answers: dict[tuple[str, ...], CommandResult | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], timeout: float = 60.0, env: Mapping[str, str] | None = None):
        key = tuple(argv)
        self.calls.append(key)
        answer = self.answers.get(key, CommandNotFound(f"{argv[0]}: command not found"))
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(argv: Sequence[str], stdout: str, returncode: int = 0) -> tuple[tuple[str, ...], CommandResult]:
    return tuple(argv), CommandResult(tuple(argv), returncode, stdout, "", 0.01)


H200_NVCC = "/usr/local/cuda-13.0/bin/nvcc"
H200_PYTHON_JSON = (
    '{"executable": "/opt/venv/bin/python", "version": "3.12.3", '
    '"packages": {"torch": "2.11.0+cu130", "flashinfer_python": "0.6.12", "sglang": "0.5.15"}}'
)


def h200_answers() -> dict[tuple[str, ...], CommandResult | Exception]:
    return dict(
        [
            ok(NVIDIA_SMI_QUERY, fixture("nvidia_smi_query_h200_x8.txt")),
            ok(NVIDIA_SMI_BANNER, fixture("nvidia_smi_banner_h200_580.txt")),
            ok(toolkit_listing_argv(), "link\t/usr/local/cuda-13.0\ntoolkit\t/usr/local/cuda-13.0\t13.0.2\n"),
            ok(compiler_search_argv(), f"nvcc\t/usr/local/cuda\t{H200_NVCC}\nnvcc\ttoolkit\t{H200_NVCC}\n"),
            ok([H200_NVCC, "--version"], fixture("nvcc_version_13.0.88_pip.txt")),
            ok(python_info_argv("python3"), H200_PYTHON_JSON),
            ok(ENV_DUMP, "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\0HOME=/root\0"),
            ok(NVRM_VERSION, fixture("nvrm_version_open_580.txt")),
        ]
    )


def test_h200_host_from_recorded_outputs():
    runner = RecordedRunner(h200_answers())
    facts = collect_facts(runner)
    assert facts.missing == {}
    assert facts.driver_version == "580.95.05"
    assert facts.cuda_driver_version == "13.0"
    assert facts.kernel_module == "open"
    assert len(facts.gpus) == 8 and facts.gpus[0] == GpuFact(
        index=0, name="NVIDIA H200", compute_capability="9.0", memory_mib=143771, pci_bus_id="00000000:19:00.0"
    )
    assert facts.toolkits == [ToolkitFact(path="/usr/local/cuda-13.0", version="13.0.2")]
    assert facts.cuda_link == "/usr/local/cuda-13.0"
    assert [(c.origin, c.version) for c in facts.compilers] == [("/usr/local/cuda", "13.0.88"), ("toolkit", "13.0.88")]
    assert runner.calls.count((H200_NVCC, "--version")) == 1  # one binary, run once
    assert facts.python is not None and facts.python.packages["flashinfer-python"] == "0.6.12"
    assert facts.env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


def test_driver_library_mismatch_sets_nvml_error():
    answers = h200_answers()
    mismatch = fixture("nvidia_smi_nvml_mismatch.txt")
    answers.update([ok(NVIDIA_SMI_QUERY, mismatch, returncode=18), ok(NVIDIA_SMI_BANNER, mismatch, returncode=18)])
    facts = collect_facts(RecordedRunner(answers))
    assert facts.nvml_error == "Driver/library version mismatch"
    assert facts.gpus == [] and facts.driver_version is None
    assert facts.missing["gpus"] == "nvidia-smi failed: Driver/library version mismatch"
    assert facts.toolkits and facts.compilers  # the rest of the host is still described


def test_unrecognised_nvidia_smi_failure_keeps_its_message():
    answers = h200_answers()
    answers.update([ok(NVIDIA_SMI_QUERY, "No devices were found\n", returncode=6)])
    facts = collect_facts(RecordedRunner(answers))
    assert facts.nvml_error is None
    assert facts.missing["driver_version"] == "nvidia-smi exited with status 6: No devices were found"


def test_banner_failure_loses_only_the_cuda_version():
    answers = h200_answers()
    answers[tuple(NVIDIA_SMI_BANNER)] = CommandTimeout("nvidia-smi ran past 30s")
    facts = collect_facts(RecordedRunner(answers))
    assert facts.driver_version == "580.95.05" and len(facts.gpus) == 8
    assert facts.cuda_driver_version is None
    assert facts.missing == {"cuda_driver_version": "nvidia-smi timed out after 30s"}


def test_garbled_outputs_become_missing_reasons():
    answers = h200_answers()
    answers.update(
        [
            ok(NVIDIA_SMI_QUERY, "0, NVIDIA H200, [N/A], 143771, 580.95.05, 00000000:19:00.0\n"),
            ok(python_info_argv("python3"), "Traceback (most recent call last):\n"),
            ok(ENV_DUMP, "PATH=/usr/bin\n"),
        ]
    )
    facts = collect_facts(RecordedRunner(answers))
    assert "compute capability '[N/A]'" in facts.missing["gpus"]
    assert facts.missing["python"].startswith("python info is not JSON")
    assert "NUL" in facts.missing["env"]
    assert facts.cuda_driver_version == "13.0"  # from the banner, which was fine
