"""Triage on real log lines from public reports (tests/fixtures/triage/public/*.yaml).

Each family holds excerpts copied verbatim from GitHub issues, pull requests and release
sources of several projects and tools (SGLang, vLLM, Ray, docker compose, nvidia-smi, the
container toolkit, pynvml, the kernel log), with look-alikes that must stay quiet and the known
misses, so that a signature is never tuned to one excerpt.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from envmgr.bench.triage import load_signatures, triage_lines, triage_text

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "triage" / "public"
FAMILIES = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(PUBLIC.glob("*.yaml"))}
EXCERPTS = [(family, e) for family, data in FAMILIES.items() for e in data["excerpts"]]

# Families with fewer real logs than two sources (none now: the expert-count check has a public
# vLLM log and SGLang 0.5.11's own assert, run on the H200).
FEWER_LOGS: dict[str, int] = {}


def as_logged(text: str) -> str:
    """The log as the program printed it: GitHub's quote marker ('> ') and a literal '^M' for
    a carriage return are how the report shows it, not part of the log."""
    text = text.replace("^M\n", "\r\n")
    return "\n".join(line[2:] if line.startswith("> ") else line for line in text.split("\n"))


@pytest.mark.parametrize(("family", "excerpt"), EXCERPTS, ids=[f"{f}:{e['id']}" for f, e in EXCERPTS])
def test_each_public_excerpt(family, excerpt):
    findings = triage_text(as_logged(excerpt["text"]))
    ids = [f.id for f in findings]
    if "expect" in excerpt:
        assert ids == excerpt["expect"], excerpt["source"]
        for f in findings:  # every template filled: no placeholder left for a reader
            assert "{" not in f.message and "{" not in f.fix, f.id
    for quiet in excerpt.get("quiet", ()):
        assert quiet not in ids, f"{quiet} fired on a look-alike: {excerpt['source']}"


@pytest.mark.parametrize(("family", "excerpt"), EXCERPTS, ids=[f"{f}:{e['id']}" for f, e in EXCERPTS])
def test_live_feed_finds_the_same_as_the_batch(family, excerpt):
    """The launcher feeds lines one by one; ``envmgr triage`` reads blocks: same findings
    (the `near` line after a match is looked for in both)."""
    text = as_logged(excerpt["text"])
    assert [f.to_dict() for f in triage_lines(text.split("\n"))] == [f.to_dict() for f in triage_text(text)]


@pytest.mark.parametrize("family", [f for f, d in FAMILIES.items() if d["signatures"]])
def test_every_family_fires_on_logs_of_several_sources_and_has_look_alikes(family):
    data = FAMILIES[family]
    sources = defaultdict(set)  # signature -> sources of the excerpts it fired on
    for e in data["excerpts"]:
        for sid in e.get("expect") or ():
            sources[sid].add(e["source"])
    fired = set().union(*sources.values()) if sources else set()
    assert len(fired) >= FEWER_LOGS.get(family, 2), (family, fired)
    assert any("quiet" in e and "miss" not in e for e in data["excerpts"]), f"{family}: no look-alike"


def test_every_wording_of_the_new_families_says_where_it_was_seen():
    signatures = load_signatures().by_id()
    for data in FAMILIES.values():
        for sid in data["signatures"]:
            for wording in signatures[sid].patterns:
                assert wording.source, f"{sid}: {wording.regex.pattern} has no source"


def test_a_chained_exception_whose_frames_come_after_the_error():
    """Constructed from the real lines of the scenario's failure: the KeyError printed first,
    the frames that say it came from torch_symm_mem.py after the chain marker."""
    log = "\n".join([
        "[2026-12-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "KeyError: 12",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/opt/sgl/sglang/srt/distributed/device_communicators/torch_symm_mem.py", line 81, in __init__',
        "    self.world_size not in TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability]",
        "RuntimeError: failed to initialise the communicator",
    ])
    assert [f.id for f in triage_text(log)] == ["symm_mem_unsupported_arch"]
    assert [f.id for f in triage_lines(log.split("\n"))] == ["symm_mem_unsupported_arch"]
    # without any torch_symm_mem line near it, a KeyError is nobody's: unclassified, at the
    # chain's original exception (printed first), not at the RuntimeError it caused
    other = triage_text(log.replace("torch_symm_mem.py", "scheduler.py"))
    assert [(f.id, f.line, f.text) for f in other] == [("unclassified_failure", 2, "KeyError: 12")]


def test_the_counts_the_closing_note_reports():
    """Per family: excerpts, those that fire as expected, look-alikes, known misses."""
    counts = {f: (len(d["excerpts"]), sum("expect" in e for e in d["excerpts"]),
                  sum("quiet" in e and "miss" not in e for e in d["excerpts"]),
                  sum("miss" in e for e in d["excerpts"])) for f, d in FAMILIES.items()}
    assert all(total == firing + alike + miss for total, firing, alike, miss in counts.values()), counts
