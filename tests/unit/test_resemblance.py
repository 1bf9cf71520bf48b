"""Resemblance names a failure no wording matched by the labelled public report it is nearest
(issue 25): only when alike enough, never from a report labelled unclassified, citing the thread."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import yaml

from envmgr.bench import resemblance
from envmgr.bench.resemblance import Corpus, family_resembled
from envmgr.bench.triage import triage_text

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "triage-corpus" / "build.py"
NEAR = [("port_in_use", "https://github.com/example/a/issues/1",
         ["RuntimeError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE"]),
        ("unclassified_failure", "https://github.com/example/b/issues/2",
         ["AttributeError: 'NoneType' object has no attribute 'req_to_token_pool'"])]


def _build_module():
    spec = importlib.util.spec_from_file_location("corpus_build", BUILD)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_corpus_is_built_from_the_labelled_rounds():
    done = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_newest_rounds_held_out_half_is_not_in_the_corpus():
    """An excerpt triage has been shown cannot score it: the round being measured stays out."""
    rounds = [int(m.group(1)) for p in (ROOT / "tests/fixtures/triage/heldout").glob("round*.yaml")
              if (m := re.fullmatch(r"round(\d+)\.yaml", p.name))]
    assert f"heldout/round{max(rounds)}.yaml" not in _build_module().ROUNDS


def test_a_reworded_failure_is_named_by_the_report_it_resembles():
    corpus = Corpus(NEAR)
    found = family_resembled(["", "RuntimeError: The server socket has failed to listen on any local network "
                                  "address. port: 30000, useIpv6: 0, code: -98, name: EADDRINUSE"], corpus)
    assert found is not None and found.family == "port_in_use" and found.source.endswith("/a/issues/1")
    assert found.similarity >= resemblance.NAMING_SIMILARITY


def test_an_unlike_failure_or_one_nearest_an_unclassified_report_is_not_named():
    corpus = Corpus(NEAR)
    assert family_resembled(["", "ValueError: tokenizer chat template has no role 'tool'"], corpus) is None
    assert family_resembled(["", "AttributeError: 'NoneType' object has no attribute 'req_to_token_pool'"],
                            corpus) is None  # identical, but its report has no family


def test_triage_names_it_cites_the_thread_and_says_how(tmp_path):
    """End to end on the shipped corpus: an entry's line with its numbers changed (as another
    user's log would print it) is named, and the finding says so."""
    entries = yaml.safe_load((ROOT / "envmgr/bench/known_failures.yaml").read_text())["excerpts"]
    entry = next(e for e in entries if e["id"] == "vllm-v1-xpu-kv-cache-4p26-needed-4p25-available")
    lines = [re.sub(r"\d+", lambda m: str(int(m.group()) + 1) if len(m.group()) > 3 else m.group(), line)
             for line in entry["lines"]]
    findings = triage_text("\n".join(["INFO starting", *lines]) + "\n")
    assert [f.id for f in findings] == [entry["family"]]
    assert findings[0].values["named_by"] == "resemblance"
    assert entry["source"] in findings[0].sources and entry["source"] in findings[0].message
    assert findings[0].line == 1 + len(lines)


def test_without_a_near_report_triage_stays_unclassified():
    findings = triage_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                           "ZeroDivisionError: division by zero\n")
    assert [f.id for f in findings] == ["unclassified_failure"]


def test_one_frame_with_another_reason_is_another_failure():
    corpus = Corpus([("disk_full", "https://github.com/example/c/issues/3",
                      ["", "RuntimeError: Failed to load the engine plan: No space left on device"])])
    same = family_resembled(["", "RuntimeError: Failed to load the engine plan: No space left on device (28)"], corpus)
    assert same is not None and same.family == "disk_full"
    assert family_resembled(["", "RuntimeError: Failed to load the engine plan: tokenizer.json is malformed"],
                            corpus) is None


def test_a_bare_exception_type_is_named_by_no_report():
    """`AssertionError` alone (an `assert` with no message) says nothing another report could
    share: two such lines are alike in their type only (round 1: a bitsandbytes weight-shape assert
    was named flashinfer_arch_unsupported by a FlashInfer MXFP4 assert)."""
    corpus = Corpus([("flashinfer_arch_unsupported", "https://github.com/example/d/issues/4", ["^^^^^^^^^^", "AssertionError"])])
    assert family_resembled(["^^^^^^^^^^", "AssertionError"], corpus) is None
    assert family_resembled(["^^^^^^^^^^", "  AssertionError  "], corpus) is None
    with_message = Corpus([("cuda_oom", "https://github.com/example/e/issues/5",
                            ["", "AssertionError: not enough memory for the KV cache"])])
    found = family_resembled(["", "AssertionError: not enough memory for the KV cache"], with_message)
    assert found is not None and found.family == "cuda_oom"


def test_where_a_message_was_raised_is_not_its_reason():
    """A C++ check's `(file.h:46)` names the place, and two failures of one codebase share its
    directories: the reasons are compared without it (round 16: a TensorRT-LLM sampling-config
    assert was named cuda_illegal_address by an illegal access raised in the same tree)."""
    assert resemblance.reason("[TensorRT-LLM][ERROR] Assertion failed: hasValues == configValue.has_value() "
                              "(/app/tensorrt_llm/cpp/include/tensorrt_llm/runtime/samplingConfig.h:46)") \
        == "hasValues == configValue.has_value()"
    corpus = Corpus([("cuda_illegal_address", "https://github.com/example/f/issues/6",
                      ["", "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaEventSynchronize(get()): an illegal "
                           "memory access was encountered (/app/tensorrt_llm/cpp/include/tensorrt_llm/runtime/cudaEvent.h:66)"])])
    assert family_resembled(["", "[TensorRT-LLM][ERROR] Assertion failed: hasValues == configValue.has_value() "
                                 "(/app/tensorrt_llm/cpp/include/tensorrt_llm/runtime/samplingConfig.h:46)"], corpus) is None
