"""A benchmark config as the command that starts its server: an argv list and env vars.

config = the spec's common ``server_flags`` + the config's overlay (``Benchmarks.flags_of``);
``true`` is a bare flag, ``false``/``null`` drop a common flag, anything else is the flag's
value, one argv item (never a shell string: a value with spaces or quotes stays one item).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from envmgr.errors import UsageError
from envmgr.spec.models import Benchmarks, FlagValue

LAUNCH_MODULE = "sglang.launch_server"
DEFAULT_HOST = "127.0.0.1"  # SGLang's defaults (FACTS.md)
DEFAULT_PORT = 30000


@dataclass(frozen=True)
class ServerCommand:
    config: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT

    @property
    def client_host(self) -> str:
        """Where a client on this host connects: a wildcard bind is reached on loopback."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def base_url(self) -> str:
        return f"http://{self.client_host}:{self.port}"


def server_command(bench: Benchmarks, config: str, python: str) -> ServerCommand:
    """The argv and env that start ``config``'s server with the environment's ``python``."""
    if config not in bench.configs:
        known = ", ".join(bench.configs) or "none"
        raise UsageError(f"no benchmark config {config!r} in the spec (configs: {known})",
                         hint="name one of benchmarks.configs, or add it there")
    flags = bench.flags_of(config)
    if "--model-path" in flags:
        raise UsageError(f"config {config}: --model-path is given as a flag",
                         hint="set benchmarks.model_path instead; envmgr passes it")
    argv = [python, "-m", LAUNCH_MODULE, "--model-path", bench.model_path, *flag_args(flags)]
    return ServerCommand(
        config=config, argv=tuple(argv), env=env_vars(bench.configs[config].env),
        host=str(flags.get("--host", DEFAULT_HOST)), port=_port(flags.get("--port", DEFAULT_PORT), config),
    )


def flag_args(flags: Mapping[str, FlagValue]) -> list[str]:
    args: list[str] = []
    for name, value in flags.items():
        if value is None or value is False:
            continue
        args.append(name)
        if value is not True:
            args.append(flag_text(value))
    return args


def flag_text(value: FlagValue) -> str:
    """How a value is written on the command line (0.92, not 0.9200000000000001)."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def env_vars(env: Mapping[str, object]) -> dict[str, str]:
    """The config's env as strings; ``null`` means "not set by this config"."""
    out = {}
    for name, value in env.items():
        if value is None:
            continue
        out[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return out


def _port(value: FlagValue, config: str) -> int:
    if isinstance(value, bool) or not str(value).isdigit() or not 0 < int(str(value)) < 65536:
        raise UsageError(f"config {config}: --port {value!r} is not a TCP port",
                         hint="give a number between 1 and 65535")
    return int(str(value))
