"""Issue 26, item 1: the rules take their release boundaries from the wheel data, and every gate
the data records is read by them.

1. Each gate of each release in sglang_releases.yaml, flashinfer_releases.yaml and
   kernel_releases.yaml is changed in turn; a fact some rule reads (a condition, a `$ref`, a
   message or fix) must change with it on that release's own stack. A gate the extractor records
   that no rule reads fails here, by table, release and field, unless UNREAD says why (and what
   it says is checked).
2. A literal sglang / flashinfer / kernel version in a rule's condition that lies inside the range
   the wheels were read for is a re-typed gate: it fails here unless the rule says, in
   `observed:`, why the wheels cannot give it.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envmgr.compat.context import stack_context
from envmgr.compat.kb import KERNEL_PACKAGES, AnyOf, Clause, default_knowledge_base, sglang_pins
from envmgr.spec import Spec, deep_merge

ROOT = Path(__file__).resolve().parents[2]
KB = default_knowledge_base()

# Recorded, deliberately not read by a rule: (table, field path prefix) -> why. Each reason is
# checked below where it is a claim about the data.
UNREAD = {
    ("sglang_releases", ("pins", "flashinfer-cubin")): "always the flashinfer-python pin (checked below), "
    "which sglang-flashinfer-pin reads; flashinfer-cubin-version checks the cubin against flashinfer-python",
    ("flashinfer_releases", ("jit_majors",)): "every JIT module's arch list is kept whole; the rules read "
    "gen_trtllm_comm_module's (all-reduce fusion), checked below to be read",
    ("kernel_releases", ("read",)): "which common_ops members the extractor read: provenance, no gate",
}


def _load_clean() -> dict:
    spec = importlib.util.spec_from_file_location("compat_rules_cases", ROOT / "tests" / "unit" / "test_compat_rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLEAN


CLEAN = _load_clean()


def rule_facts() -> set[str]:
    """Every fact a rule reads: in a condition, as a `$ref`, in its message or fix."""
    names: set[str] = set()

    def walk(cond: Any) -> None:
        if isinstance(cond, AnyOf):
            for inner in cond.any:
                walk(inner)
        elif isinstance(cond, Clause):
            names.add(cond.fact)
            if isinstance(cond.value, str) and cond.value.startswith("$"):
                names.add(cond.value[1:])

    for rule in KB.rules:
        for cond in rule.when:
            walk(cond)
        names.update(rule.requires)
        for template in (rule.message, rule.fix):
            names.update(re.split(r"[.\[]", f, maxsplit=1)[0] for _, f, _, _ in string.Formatter().parse(template) if f)
    return names


READ = rule_facts()


def leaves(entry: dict, prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Field paths of one release's gates. A mapping keyed by numbers (majors, minors) is one
    value: the table itself is the gate."""
    for key, value in entry.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value and not all(isinstance(k, int) for k in value):
            yield from leaves(value, path)
        elif value is not None:
            yield path, value


def mutated(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 97
    if isinstance(value, str):
        return "9" + value if value[:1].isdigit() else value + "-mutated"  # a version moves its major
    if isinstance(value, list):
        return [*value, 97 if value and isinstance(value[0], int) else "mutated"]
    if isinstance(value, dict):
        return {**{k: mutated(v) for k, v in value.items()}, 97: mutated(next(iter(value.values())))}
    raise TypeError(value)


def with_value(tables: dict, table: str, release: tuple, path: tuple, value: Any) -> dict:
    out = {**tables, table: copy.deepcopy(tables[table])}
    entry = out[table]
    for key in release:
        entry = entry[key]
    for key in path[:-1]:
        entry = entry[key]
    entry[path[-1]] = value
    if table == "sglang_releases":
        out["sglang_pins"] = sglang_pins(out[table])  # derived from it
    return out


def probe_spec(table: str, release: tuple) -> Spec:
    """The release on the CLEAN stack (8x SM120, driver 580, CUDA 13.0): its own pins for an sglang
    release, the package itself for a flashinfer or kernel one."""
    if table == "sglang_releases":
        pins = KB.tables[table][release[0]]["pins"]
        packages = {"sglang": release[0], "torch": pins["torch"], "flashinfer-python": pins["flashinfer-python"],
                    "flashinfer-cubin": pins.get("flashinfer-cubin"), **{k: pins.get(k) for k in KERNEL_PACKAGES}}
    elif table == "flashinfer_releases":
        packages = {"flashinfer-python": release[0], "flashinfer-cubin": release[0]}
    else:
        package, version = release
        packages = {k: (version if k == package else None) for k in KERNEL_PACKAGES}
    return Spec.model_validate(deep_merge(CLEAN, {"python": {"packages": packages}}))


def gates() -> Iterator[tuple[str, tuple, tuple, Any]]:
    for table in ("sglang_releases", "flashinfer_releases"):
        for version, entry in KB.tables[table].items():
            for path, value in leaves(entry):
                yield table, (version,), path, value
    for package, releases in KB.tables["kernel_releases"].items():
        for version, entry in releases.items():
            for path, value in leaves(entry):
                yield "kernel_releases", (package, version), path, value


def exempt(table: str, path: tuple) -> bool:
    return any(t == table and path[:len(prefix)] == prefix for t, prefix in UNREAD)


def is_read(table: str, release: tuple, path: tuple, value: Any) -> bool:
    spec = probe_spec(table, release)
    before = stack_context(spec, None, KB.tables)
    after = stack_context(spec, None, with_value(KB.tables, table, release, path, mutated(value)))
    return any(before.get(fact) != after.get(fact) for fact in READ)


def test_every_gate_in_the_wheel_data_is_read_by_a_rule():
    unread = [f"{table} {'=='.join(release)} {'.'.join(map(str, path))}"
              for table, release, path, value in gates()
              if not exempt(table, path) and not is_read(table, release, path, value)]
    assert unread == [], "gates no rule reads (wire them through compat/context.py into a rule, or list them in UNREAD with why)"


def test_a_gate_the_data_gains_and_no_rule_reads_fails_the_check():
    """The check can fail: a gate the extractor might add tomorrow is not read by anything."""
    version = next(iter(KB.tables["sglang_releases"]))
    tables = with_value(KB.tables, "sglang_releases", (version,), ("new_gate",), True)
    spec = probe_spec("sglang_releases", (version,))
    changed = with_value(tables, "sglang_releases", (version,), ("new_gate",), False)
    assert not any(stack_context(spec, None, tables).get(f) != stack_context(spec, None, changed).get(f) for f in READ)


def test_what_unread_says_of_the_data_holds():
    for version, entry in KB.tables["sglang_releases"].items():
        pins = entry.get("pins") or {}
        if "flashinfer-cubin" in pins:
            assert pins["flashinfer-cubin"] == pins["flashinfer-python"], version
    for version, entry in KB.tables["flashinfer_releases"].items():
        if "gen_trtllm_comm_module" in entry["jit_majors"]:
            assert is_read("flashinfer_releases", (version,), ("jit_majors", "gen_trtllm_comm_module"),
                           entry["jit_majors"]["gen_trtllm_comm_module"]), version
    assert any("gen_trtllm_comm_module" in e["jit_majors"] for e in KB.tables["flashinfer_releases"].values())


# --- 2. no literal boundary inside the range the wheels were read for ---------------------------

RANGES = {
    "sglang": [Version(v) for v in KB.tables["sglang_releases"]],
    "flashinfer": [Version(v) for v in KB.tables["flashinfer_releases"]],
    "sglang_kernel": [Version(v) for releases in KB.tables["kernel_releases"].values() for v in releases],
}


def boundaries(cond: Any) -> Iterator[tuple[str, Version]]:
    if isinstance(cond, AnyOf):
        for inner in cond.any:
            yield from boundaries(inner)
        return
    if not (isinstance(cond, Clause) and cond.fact in RANGES and cond.op.startswith("version_")):
        return
    value = str(cond.value)
    if value.startswith("$"):
        return  # read from the data (a fact), not typed
    if cond.op == "version_in":
        for spec in SpecifierSet(value):
            yield cond.fact, Version(spec.version)
    else:
        yield cond.fact, Version(value)


def test_no_rule_retypes_a_release_boundary_the_wheels_were_read_for():
    retyped = []
    for rule in KB.rules:
        for cond in rule.when:
            for fact, version in boundaries(cond):
                known = RANGES[fact]
                if min(known) <= version <= max(known) and not rule.observed:
                    retyped.append(f"{rule.id}: [{fact} ... {version}]")
    assert retyped == [], "read the boundary from the wheel data, or say in `observed:` why it cannot be"


def test_the_boundary_check_can_fail():
    clause = Clause(fact="flashinfer", op="version_ge", value="0.6.7")
    assert list(boundaries(clause)) == [("flashinfer", Version("0.6.7"))]
    assert min(RANGES["flashinfer"]) <= Version("0.6.7") <= max(RANGES["flashinfer"])


@pytest.mark.parametrize("rule_id", [r.id for r in KB.rules if r.observed])
def test_an_observed_boundary_says_what_was_seen(rule_id):
    assert "seen" in KB.rule(rule_id).observed and len(KB.rule(rule_id).observed) > 40
