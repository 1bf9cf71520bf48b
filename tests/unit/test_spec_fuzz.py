"""Mutation fuzzing of the scenario's real specs through the command line (issue 24).

specs/cuda128.yaml, specs/cuda13.yaml (which extends it) and specs/h200-sglang-offline.yaml are
changed field by field: a value becomes a huge number (a YAML integer, or digits as text: a
bare version, a pin, a specifier), a huge string, unicode, control characters, another type, a
nested value or an empty one; a key is renamed, deleted or written twice in the text. Each
mutant goes through ``envmgr validate``, ``plan --from`` (both ways round) and sometimes
``advise``, in-process (``envmgr.cli.main``), and, when it loads, through the Dockerfile
renderer. Whatever the mutant, every command ends in one of its documented exit codes with no
traceback and no exception out of ``main``, and a spec that loads renders.

packaging parses the numbers of a version with int(), which Python refuses past 4300 digits:
a version field with a huge number is refused as a spec error at its field, never parsed.

The fast set runs 100 mutants (a few seconds); ``-m slow`` runs 370 more (2000 and 500 found no new traceback when the limits were set).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from envmgr.cli import main
from envmgr.spec.source import dotted

SPECS = Path(__file__).resolve().parents[2] / "specs"
NAMES = ("cuda128.yaml", "cuda13.yaml", "h200-sglang-offline.yaml")
REAL = {name: yaml.safe_load((SPECS / name).read_text(encoding="utf-8")) for name in NAMES}
PARENT = "cuda128.yaml"  # what cuda13.yaml extends: written beside every mutant

# What envmgr.cli.EXIT_CODES documents for these commands (2: plan's changes).
EXIT_CODES = {"validate": {0, 1}, "plan": {0, 1, 2}, "advise": {0, 1}}

# --- values -------------------------------------------------------------------------------------

DIGITS = st.integers(4000, 6000).map(lambda n: "9" * n)  # around int()'s 4300-digit limit
huge_version_text = st.one_of(
    DIGITS,
    DIGITS.map(lambda d: f"1.{d}"),
    DIGITS.map(lambda d: f"{d}.0.1"),
    DIGITS.map(lambda d: f"2.9.1.post{d}"),
    DIGITS.map(lambda d: f"2.9.1+cu{d}"),
    DIGITS.map(lambda d: f"1!{d}"),
    DIGITS.map(lambda d: f"=={d}"),
    DIGITS.map(lambda d: f">={d}"),
    DIGITS.map(lambda d: f">=1,<{d}"),
    DIGITS.map(lambda d: f"~={d}.1"),
    DIGITS.map(lambda d: f"=={d}.*"),
    DIGITS.map(lambda d: f"==={d}"),
    st.integers(11, 300).map(lambda n: "1." + "9" * n),  # long, but int() takes it
)


class Digits(str):
    """An integer written into the YAML as its digits (one Python cannot turn into text)."""


class Dumper(yaml.SafeDumper):
    pass


Dumper.add_representer(Digits, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:int", value))

huge_number = st.one_of(
    st.integers(-(10 ** 400), 10 ** 400),  # a YAML integer beyond 64 bits (int() of it works)
    DIGITS.map(Digits),  # around int()'s limit, as a YAML integer
    st.sampled_from([2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 18, 1e308, -1e308, 5e-324]),
)
huge_string = st.integers(1000, 300_000).flatmap(
    lambda n: st.sampled_from(["a", "9", "é", "-", ".", "/", "x/"]).map(lambda c: c * (n // len(c))))
CONTROL = ["\x00", "\x01", "\x07", "\t", "\n", "\r", "\x1b[31m", "\x7f", "\x85", "\x9b", "\u2028",
           "\u2029", "\ufeff", "\u202e", "\u200b", "\U0001f600", "$HOME", "${X}", "`id`", "\\", '"',
           "'", "{{ x }}", "?a=b&c", "#f", "%00", " ", ":", ",", "*", "!=", ">="]
odd_text = st.one_of(
    st.text(max_size=30),  # any unicode (hypothesis draws no lone surrogate: YAML cannot hold one)
    st.lists(st.sampled_from(CONTROL) | st.characters(), max_size=8).map("".join),
    st.sampled_from(["", " ", "~", "null", "true", "no", ".inf", ".nan", "1e400", "0x1f", "0o17",
                     "2024-01-01", "12.8", "13.0.2", "cu130", "sm_120", "3.12", "--tp-size", "/",
                     "..", "../../etc/passwd", "/dev/zero", "a" * 64, "a" * 65, "a" * 256]),
)
wrong_type = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(0, 3) | st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(0, 3), max_size=3),
)
empty = st.sampled_from([None, "", [], {}, [None], {"": None}])


def nested(value: Any) -> st.SearchStrategy[Any]:
    """``value`` wrapped in lists and mappings, sometimes deeper than envmgr reads."""
    def wrap(depth: int) -> Any:
        out = value
        for level in range(depth):
            out = [out] if level % 2 else {"k": out}
        return out
    return st.integers(1, 80).map(wrap)


def edited(original: Any, extra: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """The original's text with ``extra`` put in it somewhere."""
    text = str(original)
    return st.tuples(st.integers(0, len(text)), extra).map(lambda p: text[:p[0]] + p[1] + text[p[0]:])


def any_value(original: Any) -> st.SearchStrategy[Any]:
    return st.one_of(huge_version_text, huge_number, huge_string, odd_text, wrong_type, empty,
                     nested(original), edited(original, st.sampled_from(CONTROL) | st.text(max_size=4) | DIGITS))


def huge_value(original: Any) -> st.SearchStrategy[Any]:
    return st.one_of(huge_version_text, huge_number, edited(original, DIGITS))


# --- fields -------------------------------------------------------------------------------------

def values_in(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, value) of everything below the root of plain data: fields, items, entries."""
    if not isinstance(value, (dict, list)):
        return []
    out = []
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        out.append(((*path, key), item))
        out += values_in(item, (*path, key))
    return out


def every_field(spec: dict) -> list[tuple]:
    return [path for path, _ in values_in(spec)]


def numeric_fields(spec: dict) -> list[tuple]:
    """Numbers, and text with a digit in it (versions, pins, flags, sizes, paths like cuda-12.8)."""
    return [path for path, value in values_in(spec)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            or isinstance(value, str) and any(c.isdigit() for c in value)]


VERSION_LIKE = re.compile(r"^[<>=!~]*[0-9]+(\.[0-9]+)*[a-z0-9.+]*$")


def version_fields(spec: dict) -> list[tuple]:
    """Text that looks like a version or a specifier: pins, the driver, toolkits, python.version."""
    return [path for path, value in values_in(spec) if isinstance(value, str) and VERSION_LIKE.match(value)]


# --- mutants ------------------------------------------------------------------------------------

Fields = Callable[[dict], list[tuple]]
Values = Callable[[Any], st.SearchStrategy[Any]]


def mutate(data: st.DataObject, spec: dict, fields: Fields, values: Values, *,
           keys: bool = True) -> tuple[str, tuple]:
    """Change one of ``fields`` of ``spec`` in place (a value of ``values``, or with ``keys`` a
    renamed or a deleted key); which change, and the field."""
    path = data.draw(st.sampled_from(fields(spec)), label="field")
    parent = spec
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = data.draw(st.sampled_from(["value", "value", "value", "value", "key", "delete"] if keys else ["value"]),
                       label="action")
    if action == "value":
        parent[last] = data.draw(values(parent[last]), label="value")
    elif action == "key" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(CONTROL) | odd_text | huge_string | DIGITS, label="key")] = parent.pop(last)
    else:
        del parent[last]
        action = "delete"
    return action, path


def duplicate_a_key(data: st.DataObject, text: str) -> str:
    """The YAML text with one ``key: value`` line written twice (the second maybe changed)."""
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[^\s#-][^:]*:(\s|$)", line)]
    if not keyed:
        return text
    i = data.draw(st.sampled_from(keyed), label="duplicated line")
    key = lines[i].split(":", 1)[0]
    again = data.draw(st.sampled_from([lines[i], f"{key}: 1\n", f"{key}: {'9' * 5000}\n", f"{key}:\n"]))
    return "".join(lines[:i + 1]) + again + "".join(lines[i + 1:])


@dataclass
class Mutant:
    name: str  # the real spec it was made from
    file: Path
    changed: list[tuple]  # the fields changed


def write_mutant(data: st.DataObject, where: Path, *, huge_only: bool = False) -> Mutant:
    """One to three changes of a real spec (``huge_only``: one huge number in a version field),
    written to ``where`` beside the parent of cuda13.yaml."""
    name = data.draw(st.sampled_from(NAMES), label="spec")
    spec = copy.deepcopy(REAL[name])
    changed: list[tuple] = []
    for _ in range(1 if huge_only else data.draw(st.integers(1, 3), label="changes")):
        if huge_only:
            fields, values = version_fields, huge_value
        else:  # a third of the changes put a huge number where a version's int() may break
            fields = data.draw(st.sampled_from([every_field, every_field, numeric_fields, version_fields]))
            values = huge_value if fields is not every_field else any_value
        if fields(spec):
            action, path = mutate(data, spec, fields, values, keys=not huge_only)
            event(f"change: {action}")
            changed.append(path)
    try:
        text = yaml.dump(spec, Dumper=Dumper, sort_keys=False, allow_unicode=data.draw(st.booleans()),
                         width=2 ** 30)
    except yaml.YAMLError:  # a string YAML cannot hold: the real spec then
        text = yaml.safe_dump(REAL[name], sort_keys=False)
    if not huge_only and data.draw(st.integers(0, 4), label="duplicate a key") == 0:
        text = duplicate_a_key(data, text)
        event("change: duplicated key")
    where.mkdir(parents=True, exist_ok=True)
    (where / PARENT).write_text((SPECS / PARENT).read_text(encoding="utf-8"), encoding="utf-8")
    file = where / f"mutant-{name}"
    file.write_text(text, encoding="utf-8")
    return Mutant(name, file, changed)


# --- running it --------------------------------------------------------------------------------

def command_lines(data: st.DataObject, mutant: Mutant) -> list[list[str]]:
    """validate and plan --from both ways round (a few ms each), and one advise (a tenth of a
    second: it evaluates every known release) or none."""
    spec, real = str(mutant.file), str(SPECS / data.draw(st.sampled_from(NAMES), label="other spec"))
    advise = data.draw(st.sampled_from([[], ["advise", spec], ["advise", spec, "--from", real]]), label="advise")
    return [["validate", spec], ["validate", "--json", spec], ["plan", spec, "--from", real],
            ["plan", real, "--from", spec, "--json"], *([advise] if advise else [])]


@dataclass
class Outcome:
    argv: list[str]
    rc: int | None
    output: str
    escaped: BaseException | None  # what main let out

    def failure(self) -> str | None:
        shown = " ".join(a if len(a) < 80 else a[:40] + "..." for a in self.argv)
        if self.escaped is not None:
            return f"envmgr {shown}: {type(self.escaped).__name__}: {str(self.escaped)[:300]}"
        if self.rc not in EXIT_CODES[self.argv[0]] or "Traceback" in self.output:
            return f"envmgr {shown}: exit {self.rc}: {self.output[-300:]}"
        return None


def run(argv: list[str], capsys: pytest.CaptureFixture) -> Outcome:
    """``envmgr ARGV`` in-process."""
    try:
        rc, escaped = main(argv), None
    except Exception as exc:  # noqa: BLE001 - exactly what the test looks for
        rc, escaped = None, exc
    out, err = capsys.readouterr()
    return Outcome(argv, rc, out + err, escaped)


def render(mutant: Mutant) -> str | None:
    """What the Dockerfile renderer raised for a mutant that loads (both install modes)."""
    from envmgr.builders.dockerfile import render_dockerfile
    from envmgr.errors import SpecError
    from envmgr.spec import load_spec

    try:
        loaded = load_spec(mutant.file)
    except SpecError:
        return None
    event("loads")
    base = loaded.spec.realize.docker.base_image or "nvidia/cuda:13.0.2-devel-ubuntu24.04"
    try:
        for wheelhouse in (False, True):
            render_dockerfile(loaded.spec, base_image=base, lock_name="lock.txt", wheelhouse=wheelhouse,
                              envmgr_version="x", spec_digest=loaded.digest)
    except Exception as exc:  # noqa: BLE001
        return f"render_dockerfile: {type(exc).__name__}: {str(exc)[:300]}"
    return None


def exercise(data: st.DataObject, mutant: Mutant, capsys: pytest.CaptureFixture) -> tuple[list[Outcome], list[str]]:
    """(each command's outcome, every way the mutant broke the promise)."""
    outcomes = [run(argv, capsys) for argv in command_lines(data, mutant)]
    found = [f for f in map(Outcome.failure, outcomes) if f]
    rendered = render(mutant)
    return outcomes, found + ([rendered] if rendered else [])


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """A fresh folder per example (removed after it: mutants reach megabytes); an empty state
    (no generation to plan from) and cwd."""
    monkeypatch.setenv("ENVMGR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)

    @contextlib.contextmanager
    def folder() -> Iterator[Path]:
        with tempfile.TemporaryDirectory(dir=tmp_path) as name:
            yield Path(name)
    return folder


# No shrinking: a mutant is big (huge strings and digits), and the failure names each command
# line and what it raised.
FAST = settings(max_examples=60, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
SLOW = settings(FAST, max_examples=250)


def mutated_real_spec(data, where, capsys) -> None:
    with where() as folder:
        _, found = exercise(data, write_mutant(data, folder), capsys)
    assert not found, "\n".join(found)


def huge_version(data, where, capsys) -> None:
    with where() as folder:
        mutant = write_mutant(data, folder, huge_only=True)
        outcomes, found = exercise(data, mutant, capsys)
    assert not found, "\n".join(found)
    (field,) = mutant.changed
    if field[0] in ("driver", "cuda", "python") and field != ("python", "torch_cuda"):
        event("a version field: refused there")
        validate = outcomes[0]
        assert validate.rc == 1, validate
        assert re.search(rf"{re.escape(str(mutant.file))}:\d+: {re.escape(dotted(field))}: ", validate.output), \
            validate.output


@FAST
@given(data=st.data())
def test_a_mutated_real_spec_ends_in_an_exit_code_not_a_traceback(data, where, capsys):
    mutated_real_spec(data, where, capsys)


@settings(FAST, max_examples=40)
@given(data=st.data())
def test_a_huge_number_in_a_version_field_is_a_spec_error_at_that_field(data, where, capsys):
    huge_version(data, where, capsys)


@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_many_mutated_real_specs_end_in_an_exit_code_not_a_traceback(data, where, capsys):
    mutated_real_spec(data, where, capsys)


@pytest.mark.slow
@settings(SLOW, max_examples=120)
@given(data=st.data())
def test_many_huge_numbers_in_version_fields_are_spec_errors(data, where, capsys):
    huge_version(data, where, capsys)


# --- numbers the compatibility rules meet ------------------------------------------------------

def command(argv: list[str], capsys: pytest.CaptureFixture) -> Outcome:
    outcome = run(argv, capsys)
    assert outcome.failure() is None, outcome.failure()
    return outcome


def test_flag_values_of_thousands_of_digits_as_text_meet_the_rules(tmp_path, capsys, monkeypatch):
    """A flag's text is not a spec error (it is the server's to refuse), so the rules read
    --tp-size, --pp-size and --dp-size of 4000 digits each: text beyond 64 bits counts as no
    number (float() of one overflows, and their product has more digits than str() writes)."""
    monkeypatch.setenv("ENVMGR_HOME", str(tmp_path / "home"))
    spec = copy.deepcopy(REAL["cuda128.yaml"])
    spec["benchmarks"]["server_flags"].update({flag: "9" * 4000 for flag in ("--tp-size", "--pp-size", "--dp-size")})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for argv in (["validate", str(tmp_path / "s.yaml")], ["advise", str(tmp_path / "s.yaml")]):
        assert command(argv, capsys).rc in (0, 1)


def test_a_driver_version_of_thousands_of_digits_in_facts_meets_the_rules(tmp_path, capsys, monkeypatch):
    """Without a driver in the spec, the rules read the observed one: a version packaging cannot
    parse (its int() refuses 5000 digits) is no version, as one that is not PEP 440."""
    monkeypatch.setenv("ENVMGR_HOME", str(tmp_path / "home"))
    spec = copy.deepcopy(REAL["cuda128.yaml"])
    del spec["driver"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (tmp_path / "facts.json").write_text(json.dumps({"driver_version": "9" * 5000}))
    outcome = command(["validate", str(tmp_path / "s.yaml"), "--facts", str(tmp_path / "facts.json")], capsys)
    assert outcome.rc in (0, 1)
