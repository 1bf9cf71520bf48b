"""The pure fact parsers, on recorded outputs (tests/fixtures/facts/README.md says which are real)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envmgr.errors import FactsError
from envmgr.facts.model import GpuFact, ToolkitFact
from envmgr.facts.parsers import (
    REDACTED,
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

FIXTURES = Path(__file__).parent.parent / "fixtures" / "facts"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- nvidia-smi query ---------------------------------------------------------------------


def test_query_one_h200():
    # recorded on the H200 device machine (docs/evidence/h200-facts/)
    driver, gpus = parse_nvidia_smi_query(fixture("nvidia_smi_query_h200_x1.txt"))
    assert driver == "580.159.04"
    assert gpus == [
        GpuFact(
            index=0,
            name="NVIDIA H200",
            compute_capability="9.0",
            memory_mib=143771,
            pci_bus_id="00000000:00:06.0",
        )
    ]
    assert gpus[0].arch == "sm_90"


def test_query_eight_h200_keeps_order_and_bus_ids():
    driver, gpus = parse_nvidia_smi_query(fixture("nvidia_smi_query_h200_x8.txt"))
    assert driver == "580.95.05"
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[7].pci_bus_id == "00000000:DB:00.0"
    assert {g.name for g in gpus} == {"NVIDIA H200"}


def test_query_eight_rtx_pro_6000_blackwell():
    driver, gpus = parse_nvidia_smi_query(fixture("nvidia_smi_query_rtxpro6000_x8.txt"))
    assert driver == "570.124.06"
    assert len(gpus) == 8
    assert {g.name for g in gpus} == {"NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}
    assert {g.arch for g in gpus} == {"sm_120"}
    assert {g.memory_mib for g in gpus} == {97887}


def test_query_empty_output_means_no_gpus():
    assert parse_nvidia_smi_query("") == (None, [])
    assert parse_nvidia_smi_query("\n\n") == (None, [])


def test_query_memory_not_available_is_none():
    # Unified-memory parts (GB10, GH200 in some modes) report memory.total as [N/A].
    _, gpus = parse_nvidia_smi_query("0, NVIDIA GB10, 12.1, [N/A], 580.95.05, 0000000F:01:00.0\n")
    assert gpus[0].memory_mib is None
    assert gpus[0].compute_capability == "12.1"


def test_query_comma_in_name_is_kept():
    _, gpus = parse_nvidia_smi_query("3, Some GPU, Rev B, 8.9, 24564, 550.54.14, 00000000:02:00.0\n")
    assert gpus[0].name == "Some GPU, Rev B"
    assert gpus[0].index == 3


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("0, NVIDIA H200, 9.0, 143771, 580.95.05", "expected 6 fields"),
        ("x, NVIDIA H200, 9.0, 143771, 580.95.05, 00000000:19:00.0", "index"),
        ("0, NVIDIA H200, [N/A], 143771, 580.95.05, 00000000:19:00.0", "compute capability"),
        ("0, NVIDIA H200, 9.0, 143771, [N/A], 00000000:19:00.0", "driver version"),
        # The csv header (someone dropped 'noheader'):
        ("index, name, compute_cap, memory.total [MiB], driver_version, pci.bus_id", "index"),
    ],
)
def test_query_malformed_line_names_the_problem(line, complaint):
    with pytest.raises(FactsError, match=complaint):
        parse_nvidia_smi_query(line + "\n")


def test_query_two_driver_versions_is_an_error():
    text = (
        "0, NVIDIA H200, 9.0, 143771, 580.95.05, 00000000:19:00.0\n"
        "1, NVIDIA H200, 9.0, 143771, 570.124.06, 00000000:3B:00.0\n"
    )
    with pytest.raises(FactsError, match="several driver versions"):
        parse_nvidia_smi_query(text)


# --- nvidia-smi errors and banner ---------------------------------------------------------


def test_error_driver_library_mismatch():
    assert parse_nvidia_smi_error(fixture("nvidia_smi_nvml_mismatch.txt")) == "Driver/library version mismatch"


def test_error_no_driver():
    assert (
        parse_nvidia_smi_error(fixture("nvidia_smi_no_driver.txt"))
        == "couldn't communicate with the NVIDIA driver"
    )


def test_error_other_nvml_failure_is_reported_verbatim():
    # Seen in containers started without the GPU devices.
    assert parse_nvidia_smi_error("Failed to initialize NVML: Unknown Error\n") == "Unknown Error"


@pytest.mark.parametrize("name", ["nvidia_smi_banner_h200_580.txt", "nvidia_smi_query_h200_x8.txt"])
def test_error_none_on_healthy_output(name):
    assert parse_nvidia_smi_error(fixture(name)) is None


@pytest.mark.parametrize(
    ("name", "cuda"),
    [("nvidia_smi_banner_h200_580.txt", "13.0"), ("nvidia_smi_banner_rtxpro6000_570.txt", "12.8")],
)
def test_banner_cuda_version(name, cuda):
    assert parse_cuda_version_from_smi(fixture(name)) == cuda


def test_banner_cuda_umd_version_of_newer_drivers():
    # The R610 banner renames the field (sgl-project/sglang#27487).
    line = "| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |"
    assert parse_cuda_version_from_smi(line) == "13.3"


@pytest.mark.parametrize(
    "text", ["", "CUDA Version: N/A", fixture("nvidia_smi_no_driver.txt"), "CUDA Version : Not Found"]
)
def test_banner_without_cuda_version(text):
    assert parse_cuda_version_from_smi(text) is None


# --- nvcc / ptxas -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvcc_version_13.0.88_pip.txt", ("13.0.88", "13.0")),
        ("ptxas_version_13.0.88_pip.txt", ("13.0.88", "13.0")),
        ("ptxas_version_12.8.93_pip_cu12.txt", ("12.8.93", "12.8")),
    ],
)
def test_compiler_version_from_real_output(name, expected):
    assert parse_nvcc_version(fixture(name)) == expected


@pytest.mark.parametrize(
    "text",
    ["", "nvcc: NVIDIA (R) Cuda compiler driver\n", "sh: 1: nvcc: not found", "release 13.0, V13.0.88"],
)
def test_compiler_version_unrecognised_output(text):
    with pytest.raises(FactsError, match="Cuda compilation tools"):
        parse_nvcc_version(text)


# --- toolkit listing ----------------------------------------------------------------------


def test_toolkit_listing_dedupes_directories_reached_by_several_names():
    text = (
        "link\t/usr/local/cuda-13.0\n"
        "toolkit\t/usr/local/cuda-13.0\t13.0.2\n"  # /usr/local/cuda
        "toolkit\t/usr/local/cuda-12.8\t12.8.1\n"
        "toolkit\t/usr/local/cuda-13.0\t13.0.2\n"  # /usr/local/cuda-13
        "toolkit\t/usr/local/cuda-13.0\t13.0.2\n"  # /usr/local/cuda-13.0
        "toolkit\t/usr/local/cuda-11.0\t\n"  # no version file
    )
    toolkits, link = parse_toolkit_listing(text)
    assert link == "/usr/local/cuda-13.0"
    assert toolkits == [
        ToolkitFact(path="/usr/local/cuda-13.0", version="13.0.2"),
        ToolkitFact(path="/usr/local/cuda-12.8", version="12.8.1"),
        ToolkitFact(path="/usr/local/cuda-11.0", version=None),
    ]


def test_toolkit_listing_empty_means_no_toolkit():
    assert parse_toolkit_listing("") == ([], None)


def test_toolkit_listing_rejects_unknown_lines():
    with pytest.raises(FactsError, match="line 2"):
        parse_toolkit_listing("link\t/usr/local/cuda-13.0\n/usr/local/cuda-13.0 13.0.2\n")


# --- python info --------------------------------------------------------------------------


def test_python_info_canonicalises_package_names():
    info = parse_python_info(fixture("python_info_host_py311.json"))
    assert info.executable.endswith("python3")
    assert info.version == "3.11.7"
    assert info.packages["pydantic"].startswith("2.")
    assert "pyyaml" in info.packages and "PyYAML" not in info.packages
    assert "typing-extensions" in info.packages and "typing_extensions" not in info.packages
    assert all(name == name.lower() and "_" not in name for name in info.packages)


def test_python_info_first_distribution_on_sys_path_wins():
    text = json.dumps(
        {"executable": "/v/bin/python", "version": "3.12.3", "packages": {"Foo_Bar": "2.0", "foo.bar": "1.0"}}
    )
    assert parse_python_info(text).packages == {"foo-bar": "2.0"}


def test_pip_cuda_tools_from_real_venv():
    tools = parse_pip_cuda_tools(fixture("python_info_venv_nvcc_wheels.json"))
    site_packages = "/tmp/pyvenv/lib/python3.11/site-packages/"
    assert sorted((t.kind, t.path.removeprefix(site_packages), t.package) for t in tools) == [
        ("nvcc", "nvidia/cu13/bin/nvcc", "nvidia-cuda-nvcc"),
        ("ptxas", "nvidia/cu13/bin/ptxas", "nvidia-cuda-nvcc"),
        # The -cu12 wheel has ptxas only, under the older layout.
        ("ptxas", "nvidia/cuda_nvcc/bin/ptxas", "nvidia-cuda-nvcc-cu12"),
    ]


def test_pip_cuda_tools_absent_key_means_none():
    assert parse_pip_cuda_tools('{"executable": "p", "version": "3.11.7", "packages": {}}') == []


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("Traceback (most recent call last):", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"executable": "p", "version": "3.11.7"}', "packages"),
        ('{"executable": "p", "version": "3.11.7", "packages": {"torch": 2}}', "torch"),
    ],
)
def test_python_info_rejects_bad_output(text, complaint):
    with pytest.raises(FactsError, match=complaint):
        parse_python_info(text)


def test_pip_cuda_tools_rejects_unknown_kind():
    text = json.dumps({"cuda_tools": [{"kind": "nvlink", "path": "/x/bin/nvlink", "package": "p"}]})
    with pytest.raises(FactsError, match="cuda_tools"):
        parse_pip_cuda_tools(text)


# --- env ----------------------------------------------------------------------------------


def env_dump(**variables: str) -> str:
    return "".join(f"{name}={value}\0" for name, value in variables.items())


def test_env_keeps_only_what_matters():
    text = env_dump(
        HOME="/root",
        PATH="/usr/local/cuda/bin:/usr/bin",
        LD_LIBRARY_PATH="/usr/local/cuda/lib64",
        CUDA_HOME="/usr/local/cuda-13.0",
        CUDA_VISIBLE_DEVICES="0,1",
        CUDA_MODULE_LOADING="LAZY",
        NCCL_P2P_DISABLE="1",
        FLASHINFER_CUDA_ARCH_LIST="9.0a 12.0f",
        TORCH_CUDA_ARCH_LIST="9.0",
        SGLANG_LOG_LEVEL="debug",
        NVSHMEM_DISABLE_CUDA_VMM="1",
        LANG="C.UTF-8",
        NCCLX="not a prefix match",
    )
    assert parse_env(text) == {
        "PATH": "/usr/local/cuda/bin:/usr/bin",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "CUDA_HOME": "/usr/local/cuda-13.0",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "CUDA_MODULE_LOADING": "LAZY",
        "NCCL_P2P_DISABLE": "1",
        "FLASHINFER_CUDA_ARCH_LIST": "9.0a 12.0f",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "SGLANG_LOG_LEVEL": "debug",
        "NVSHMEM_DISABLE_CUDA_VMM": "1",
    }


def test_env_values_may_hold_newlines_and_equals():
    text = env_dump(NCCL_DEBUG_FILE="/tmp/a=b\nc", OTHER="x")
    assert parse_env(text) == {"NCCL_DEBUG_FILE": "/tmp/a=b\nc"}


def test_env_redacts_what_looks_like_a_credential():
    assert parse_env(env_dump(SGLANG_API_KEY="sk-123", TORCH_HOME="/t")) == {
        "SGLANG_API_KEY": REDACTED,
        "TORCH_HOME": "/t",
    }


def test_facts_and_specs_share_one_secret_rule():
    """What a host's facts redact is what a spec's env redacts (envmgr.secrets, issue 28)."""
    from envmgr.secrets import looks_secret

    names = ["SGLANG_API_KEY", "NCCL_SECRET", "TORCH_PASSWORD_FILE", "CUDA_CREDENTIALS", "SGLANG_HF_TOKEN",
             "CUDA_HOME", "NCCL_IB_HCA", "TORCH_KEYS_DIR", "SGLANG_TOKENIZER_PATH"]
    parsed = parse_env(env_dump(**{name: "v" for name in names}))
    assert {n for n, v in parsed.items() if v == REDACTED} == {n for n in names if looks_secret(n)} == {
        "SGLANG_API_KEY", "NCCL_SECRET", "TORCH_PASSWORD_FILE", "CUDA_CREDENTIALS", "SGLANG_HF_TOKEN"}


def test_env_empty_and_not_nul_separated():
    assert parse_env("") == {}
    with pytest.raises(FactsError, match="NUL"):
        parse_env("PATH=/usr/bin\nCUDA_HOME=/usr/local/cuda\n")


# --- robustness: random text never escapes as anything but FactsError ----------------------

PARSERS = [
    parse_nvidia_smi_query,
    parse_nvidia_smi_error,
    parse_cuda_version_from_smi,
    parse_nvcc_version,
    parse_toolkit_listing,
    parse_python_info,
    parse_pip_cuda_tools,
    parse_env,
]

# Random text, plus text built from the tokens these outputs are made of, so that the
# fuzzing reaches past the first check of each parser.
TOKENS = [", ", ",", "\n", "\t", "\0", "=", "0", "9.0", "12.0", "143771", "[N/A]", "580.95.05", "link", "toolkit",
          "NVIDIA H200", "{", "}", '"', ":", "[", "]", "packages", "cuda_tools", "kind", "nvcc", "ptxas", "path",
          "release 13.0, V13.0.88", "Cuda compilation tools, ", "CUDA Version: ", "Failed to initialize NVML: ",
          "CUDA_HOME", "PATH", "²", "٣", "1e999", "-1"]  # fmt: skip
token_soup = st.lists(st.sampled_from(TOKENS)).map("".join)
# Lines of separated fields, like nvidia-smi's csv and the toolkit listing.
field = st.sampled_from(TOKENS) | st.text(max_size=6)
fielded_lines = st.builds(
    lambda rows, sep: "\n".join(sep.join(row) for row in rows),
    st.lists(st.lists(field, min_size=2, max_size=7), max_size=4),
    st.sampled_from([", ", "\t"]),
)

def mostly(*choices: str) -> st.SearchStrategy[str]:
    """One of ``choices`` (mostly well-formed) 3 times in 4, so that later checks are reached."""
    pick = st.sampled_from(choices)
    return st.one_of(pick, pick, pick, st.text(max_size=6))  # 3 to 1


# Lines shaped like the nvidia-smi query: each field valid or not, independently.
gpu_lines = st.lists(
    st.tuples(
        mostly("0", "7", "²", "٣"),
        mostly("NVIDIA H200"),
        mostly("9.0", "12.0", "[N/A]", "٣.٣"),
        mostly("143771", "[N/A]", "²"),
        mostly("580.95.05", "570.124.06"),
        mostly("00000000:19:00.0"),
    ).map(", ".join),
    max_size=3,
).map("\n".join)
fact_like_text = st.one_of(st.text(), token_soup, fielded_lines)


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@settings(max_examples=300, deadline=None)
@given(text=fact_like_text)
def test_parsers_raise_only_facts_error(parse, text):
    try:
        parse(text)
    except FactsError:
        pass


@settings(max_examples=500, deadline=None)
@given(text=gpu_lines)
def test_query_parser_raises_only_facts_error_on_gpu_like_lines(text):
    try:
        parse_nvidia_smi_query(text)
    except FactsError:
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
python_info_like = st.fixed_dictionaries(
    {},
    optional={
        "executable": json_values | st.text(),
        "version": json_values | st.text(),
        "packages": json_values | st.dictionaries(st.text(), json_values | st.text()),
        "cuda_tools": json_values
        | st.lists(st.fixed_dictionaries({}, optional={"kind": st.sampled_from(["nvcc", "ptxas", 1]),
                                                        "path": json_values, "package": json_values})),
    },
)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("parse", [parse_python_info, parse_pip_cuda_tools], ids=lambda p: p.__name__)
@settings(max_examples=300, deadline=None)
@given(data=python_info_like)
def test_python_info_parsers_raise_only_facts_error_on_any_json(parse, data):
    try:
        parse(json.dumps(data))
    except FactsError:
        pass


@pytest.mark.parametrize(("name", "flavour"), [("nvrm_version_h200_580.txt", "open"),
                                              ("nvrm_version_open_580.txt", "open"),
                                              ("nvrm_version_proprietary_570.txt", "proprietary")])
def test_kernel_module_flavour_from_proc_version(name, flavour):
    assert parse_kernel_module(fixture(name)) == flavour


def test_kernel_module_unreadable_is_unknown():
    assert parse_kernel_module("") is None
    assert parse_kernel_module("GCC version: gcc 12\n") is None
