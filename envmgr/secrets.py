"""Secrets: environment values that must never show.

An environment variable of the spec (``env:`` or a benchmark config's ``env:``) is secret when
its name looks like one (``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``, ...) or the
spec's ``secrets:`` section marks it (``secrets: {MY_CREDENTIAL: true}``; ``false`` clears a
name that only looks like a secret). Its value is replaced by ``REDACTED`` in everything
envmgr prints or records about a spec: plan actions, apply's log, the generation's
``spec.yaml`` and ``plan.json``, ``bench --dry-run``, ``result.json``. It reaches the process
that needs it through that process's environment (never its command line), and is never
written into an image: the image builder leaves it out of the Dockerfile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envmgr.spec.models import Spec

REDACTED = "<redacted>"
# *_TOKEN, *_KEY, *_SECRET (HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY), *PASSWORD*
SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|KEY|SECRET)$|PASSWORD|PASSWD", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_names(spec: Spec) -> frozenset[str]:
    """Every env name of the spec (stack and configs) whose value is secret."""
    names = set(spec.env)
    if spec.benchmarks is not None:
        for config in spec.benchmarks.configs.values():
            names |= set(config.env)
    names |= set(spec.secrets)
    return frozenset(n for n in names if spec.secrets.get(n, looks_secret(n)))


class Redactor:
    """Replaces a spec's secret values (by name, and wherever the text shows them)."""

    def __init__(self, names: Iterable[str] = (), values: Iterable[str] = ()) -> None:
        self.names = frozenset(names)
        # longest first, so a secret that contains another is replaced whole
        self._values = sorted({v for v in values if v}, key=len, reverse=True)

    @classmethod
    def for_spec(cls, spec: Spec) -> Redactor:
        names = secret_names(spec)
        envs = [spec.env] + ([c.env for c in spec.benchmarks.configs.values()] if spec.benchmarks else [])
        values = [str(env[n]) for env in envs for n in names if env.get(n) not in (None, "")]
        return cls(names, values)

    def env(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """``env`` with each secret's value replaced."""
        return {k: REDACTED if k in self.names and v is not None else v for k, v in env.items()}

    def text(self, text: str) -> str:
        """``text`` with every secret value in it replaced (log lines, messages)."""
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def data(self, value: Any) -> Any:
        """Plain data (JSON-like) with every secret value replaced, at any depth."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value
