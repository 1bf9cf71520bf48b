"""Evaluate the knowledge base's rules against a spec (and observed facts)."""

from __future__ import annotations

import functools
import re
import string
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envmgr import severity
from envmgr.compat.context import Context, config_context, stack_context
from envmgr.compat.kb import AnyOf, Condition, KnowledgeBase, Rule, default_knowledge_base
from envmgr.findings import Finding
from envmgr.spec.load import LoadedSpec
from envmgr.spec.models import Spec

if TYPE_CHECKING:  # facts pull in their collectors; validate needs only the type
    from envmgr.facts.model import Facts



def check(loaded: LoadedSpec, facts: Facts | None = None,
          kb: KnowledgeBase | None = None) -> list[Finding]:
    """Findings for a loaded spec, each located at the file:line it is about."""
    findings = evaluate(loaded.spec, facts, kb)
    return [_locate(f, loaded) for f in findings]


def evaluate(spec: Spec, facts: Facts | None = None, kb: KnowledgeBase | None = None,
             installed_modules: frozenset[str] | None = None) -> list[Finding]:
    """Every rule that fires for the stack, then for each benchmark config; errors first.
    ``installed_modules``: what the environment can import, where it was asked (the bench)."""
    kb = kb or default_knowledge_base()
    stack = stack_context(spec, facts, kb.tables)
    found = [_finding(r, stack, kb) for r in kb.rules if r.scope == "stack" and fires(r, stack)]
    if spec.benchmarks is not None:
        per_config = []
        for name in spec.benchmarks.configs:
            ctx = config_context(stack, spec, name, kb.tables.get("feature_modules"), installed_modules)
            per_config += [_finding(r, ctx, kb, spec, name) for r in kb.rules
                           if r.scope == "config" and fires(r, ctx)]
            per_config += _flag_findings(spec, name, ctx, kb)
        found += _merge_configs(per_config)
    return sorted(found, key=severity.rank)


def _merge_configs(findings: list[Finding]) -> list[Finding]:
    """One finding per cause: a common flag that breaks every config is reported once."""
    merged: dict[tuple, tuple[Finding, list[str]]] = {}
    for f in findings:
        first, configs = merged.setdefault((f.id, f.field, f.message), (f, []))
        configs += f.configs
    return [replace(first, configs=tuple(configs)) for first, configs in merged.values()]


def fires(rule: Rule, ctx: Context) -> bool:
    if any(ctx.get(name) is None for name in rule.requires):
        return False
    return all(_holds(c, ctx) for c in rule.when)


def _holds(cond: Condition, ctx: Context) -> bool:
    if isinstance(cond, AnyOf):
        return any(_holds(c, ctx) for c in cond.any)
    left = ctx.get(cond.fact)
    right = ctx.get(cond.ref) if cond.ref else cond.value
    return OPERATIONS[cond.op](left, right)


def _version(value: Any) -> Version | None:
    try:
        return Version(str(value)) if value is not None else None
    except ValueError:  # InvalidVersion, or a number of over 4300 digits that int() refuses (a fact)
        return None


def _version_in(left: Any, right: Any) -> bool | None:
    v = _version(left)
    if v is None or right is None:
        return None
    try:
        return SpecifierSet(str(right)).contains(v, prereleases=True)
    except InvalidSpecifier:
        return None


def _compare_versions(test):
    def op(left: Any, right: Any) -> bool:
        a, b = _version(left), _version(right)
        return a is not None and b is not None and test(a, b)
    return op


def _compare_numbers(test):
    def op(left: Any, right: Any) -> bool:
        try:
            return left is not None and right is not None and test(_number(left), _number(right))
        except (TypeError, ValueError):
            return False
    return op


def _number(value: Any) -> int | float:
    """A fact as a number: ints as they are (float() of one past 1e308 overflows; Python
    compares an int with a float exactly), text through float()."""
    return value if isinstance(value, int | float) else float(value)


# Unknown (None) operands make every test false, except absent / ne / not_in / not_matches,
# which ask "is it not there / not that": a missing flag is not equal to a value.
OPERATIONS = {
    "eq": lambda a, b: a is not None and a == b,
    "ne": lambda a, b: a != b,
    "in": lambda a, b: a is not None and isinstance(b, list) and a in b,
    "not_in": lambda a, b: isinstance(b, list) and a not in b,
    "present": lambda a, b: a is not None,
    "absent": lambda a, b: a is None,
    "version_in": lambda a, b: _version_in(a, b) is True,
    "version_not_in": lambda a, b: _version_in(a, b) is False,
    "version_lt": _compare_versions(lambda a, b: a < b),
    "version_ge": _compare_versions(lambda a, b: a >= b),
    "version_ne": _compare_versions(lambda a, b: a != b),
    "lt": _compare_numbers(lambda a, b: a < b),
    "le": _compare_numbers(lambda a, b: a <= b),
    "gt": _compare_numbers(lambda a, b: a > b),
    "ge": _compare_numbers(lambda a, b: a >= b),
    "matches": lambda a, b: a is not None and re.search(str(b), str(a)) is not None,
    "not_matches": lambda a, b: a is None or re.search(str(b), str(a)) is None,
}


class _Facts(dict):
    """Template values: unknown facts render as '?' rather than failing."""

    def __missing__(self, key: str) -> str:
        return "?"


def render(template: str, ctx: Context) -> str:
    values = _Facts({k: _show(ctx[k]) for k in _fields(template) if k in ctx})
    return string.Formatter().vformat(template, (), values)


@functools.lru_cache(maxsize=None)
def _fields(template: str) -> frozenset[str]:
    """The facts a message template names (only those are shown: a context has ~70)."""
    return frozenset(re.split(r"[.\[]", name, maxsplit=1)[0]
                     for _, name, _, _ in string.Formatter().parse(template) if name)


def _show(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if value is True:
        return "set"
    return str(value)


def _finding(rule: Rule, ctx: Context, kb: KnowledgeBase,
             spec: Spec | None = None, config: str | None = None) -> Finding:
    field = render(rule.at, ctx) if rule.at else ""
    if config is not None and spec is not None:
        field = _config_field(field, spec, config)
    return Finding(id=rule.id, severity=rule.severity, message=render(rule.message, ctx),
                   fix=render(rule.fix, ctx), sources=(kb.sources[rule.source],),
                   field=field, configs=(config,) if config else (),
                   feature=rule.feature_off or None, stops=rule.stops,
                   edit=tuple((flag, _edit_value(value, ctx)) for flag, value in rule.edit.items()))


def _edit_value(value: Any, ctx: Context) -> Any:
    """A rule's edit value with its facts filled in; a number stays a number."""
    if not isinstance(value, str):
        return value
    text = render(value, ctx)
    return int(text) if text.isdigit() else text


def _flag_findings(spec: Spec, config: str, ctx: Context, kb: KnowledgeBase) -> list[Finding]:
    """The config's flags against those its sglang release has (``envmgr.compat.flags``)."""
    from envmgr.compat.flags import check_flags

    assert spec.benchmarks is not None
    sglang = ctx.get("sglang")
    problems = check_flags(spec.benchmarks.flags_of(config), str(sglang) if sglang else None,
                           where=lambda flag: _config_field(flag, spec, config))
    return [replace(p, sources=(kb.sources["sglang_args"],), configs=(config,)) for p in problems]


def _config_field(at: str, spec: Spec, config: str) -> str:
    """Where a config-scoped fact was written: the config's overlay or the common part."""
    bench = spec.benchmarks
    assert bench is not None
    overlay = bench.configs[config]
    if at.startswith("--"):
        if at in overlay.flags:
            return f"benchmarks.configs.{config}.flags.{at}"
        if at in bench.server_flags:
            return f"benchmarks.server_flags.{at}"
        return f"benchmarks.configs.{config}"
    if at.startswith("env.") and at[4:] in overlay.env:
        return f"benchmarks.configs.{config}.env.{at[4:]}"
    return at


def _locate(finding: Finding, loaded: LoadedSpec) -> Finding:
    path = _split_field(finding.field)
    if not path:
        return finding
    return replace(finding, where=loaded.locate(path))


def _split_field(field: str) -> tuple[str, ...]:
    """``python.packages.zope.interface`` keeps the package name whole."""
    if not field:
        return ()
    for prefix in ("python.packages.", "benchmarks.server_flags.", "env."):
        if field.startswith(prefix):
            return (*prefix.rstrip(".").split("."), field[len(prefix):])
    m = re.fullmatch(r"benchmarks\.configs\.([^.]+)\.(flags|env)\.(.+)", field)
    if m:
        return ("benchmarks", "configs", m.group(1), m.group(2), m.group(3))
    return tuple(field.split("."))
