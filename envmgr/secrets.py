"""Secrets: environment values that must never show.

An environment variable of the spec (``env:`` or a benchmark config's ``env:``) is secret when
its name looks like one (``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``, ...) or the
spec's ``secrets:`` section marks it (``secrets: {MY_CREDENTIAL: true}``; ``false`` clears a
name that only looks like a secret). Its value is replaced by ``REDACTED`` in everything
envmgr prints or records about a spec: plan actions, apply's log, the generation's
``spec.yaml`` and ``plan.json``, ``bench --dry-run``, ``result.json``, ``envmgr env``; by
name, and wherever another value holds it (``URL: https://u:TOKEN@host``). It reaches the
process that needs it through that process's environment (never its command line), and is
never written into an image: the image builder leaves it out of the Dockerfile.

What an environment holds (``envmgr env``) is never shown on the word of a file that is easier
to rewrite than the secret itself: ``secret_names_of`` is the union of every source, never
fewer than the name rule (there, a spec's ``false`` clears nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envmgr.spec.models import Spec

REDACTED = "<redacted>"
# *_TOKEN, *_KEY, *_SECRET (HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY), *PASSWORD*,
# *CREDENTIAL* (GOOGLE_APPLICATION_CREDENTIALS): for a spec's env and a host's facts alike
SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|KEY|SECRET)$|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


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


def holding_secrets(spec: Spec) -> frozenset[str]:
    """The env names whose values must stay out of anything envmgr writes for others to read
    (an image's ENV, a check's title): the secrets, and every variable whose value holds a
    secret's value (``URL: https://u:TOKEN@host``)."""
    redact = Redactor.for_spec(spec)
    return redact.names | frozenset(n for n, v in spec.env.items() if redact.text(str(v)) != str(v))


def secret_names_of(names: Iterable[str], *marked: Iterable[str]) -> frozenset[str]:
    """The secret names among ``names``: those the name rule matches, and every name any
    source marks (a spec's ``secrets:``, the names an environment recorded). A source can add
    names, never clear one the rule matches."""
    names = frozenset(names)
    return frozenset(n for n in names if looks_secret(n)) | (names & frozenset().union(*marked))


class Redactor:
    """Replaces secret values: a secret's by its name, and every secret value wherever a text
    shows it. The one redaction of envmgr: every value it prints goes through here."""

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

    def value(self, name: str, value: Any) -> Any:
        """The value of variable ``name`` as it may be shown: a secret's replaced whole,
        another's with every secret value in it replaced."""
        if value is None:
            return None
        return REDACTED if name in self.names else self.data(value)

    def env(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """``env`` with each secret's value replaced, and secret values inside the others."""
        return {k: self.value(k, v) for k, v in env.items()}

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
