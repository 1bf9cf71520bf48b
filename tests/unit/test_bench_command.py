"""A benchmark config becomes an argv list: flags in order, values as single items."""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.bench.command import flag_args, server_command
from envmgr.errors import UsageError
from envmgr.spec import load_spec
from envmgr.spec.models import Benchmarks

SPECS = Path(__file__).resolve().parents[2] / "specs"


def bench(**overrides) -> Benchmarks:
    data = {"model_path": "/models/m", "server_flags": {"--tp-size": 8, "--trust-remote-code": True},
            "configs": {"base": {}}}
    data.update(overrides)
    return Benchmarks.model_validate(data)


def test_scenario_ep_config_renders_common_flags_then_overlay():
    spec = load_spec(SPECS / "cuda128.yaml").spec
    cmd = server_command(spec.benchmarks, "ep_flashinfer_a2a", "/venv/bin/python")
    assert cmd.argv[:5] == ("/venv/bin/python", "-m", "sglang.launch_server", "--model-path",
                            "/models/Kimi-K2.5-INT4")
    args = list(cmd.argv[5:])
    assert args[args.index("--tp-size") + 1] == "8"
    assert args[args.index("--moe-a2a-backend") + 1] == "flashinfer"
    assert args[args.index("--moe-runner-backend") + 1] == "flashinfer_cutlass"
    assert "--trust-remote-code" in args and args[args.index("--trust-remote-code") + 1].startswith("--")
    assert (cmd.host, cmd.port, cmd.base_url) == ("127.0.0.1", 30000, "http://127.0.0.1:30000")


def test_overlay_false_drops_a_common_flag_and_values_stay_one_item():
    b = bench(configs={"x": {"flags": {"--trust-remote-code": False,
                                       "--served-model-name": "a b; rm -rf /",
                                       "--mem-fraction-static": 0.92}}})
    argv = server_command(b, "x", "py").argv
    assert "--trust-remote-code" not in argv
    assert argv[argv.index("--served-model-name") + 1] == "a b; rm -rf /"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.92"


def test_config_env_becomes_strings_and_null_is_unset():
    b = bench(configs={"x": {"env": {"NCCL_P2P_DISABLE": 1, "NCCL_DEBUG": None, "FLAG": True}}})
    assert server_command(b, "x", "py").env == {"NCCL_P2P_DISABLE": "1", "FLAG": "1"}


@pytest.mark.parametrize("flags, message", [
    ({"--port": "http"}, "not a TCP port"),
    ({"--port": 70000}, "not a TCP port"),
    ({"--model-path": "/other"}, "--model-path is given as a flag"),
])
def test_bad_configs_are_clear_errors(flags, message):
    b = bench(configs={"x": {"flags": flags}})
    with pytest.raises(UsageError, match=message):
        server_command(b, "x", "py")


def test_unknown_config_names_the_known_ones():
    with pytest.raises(UsageError, match="configs: base"):
        server_command(bench(), "nope", "py")


def test_flag_args_bare_and_valued():
    assert flag_args({"--a": True, "--b": 3, "--c": None, "--d": False, "--e": 1.5}) == ["--a", "--b", "3", "--e", "1.5"]
