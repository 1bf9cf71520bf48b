"""The knowledge base data itself: malformed rule data is refused with a clear error."""

from __future__ import annotations

import textwrap

import pytest

from envmgr.compat.kb import default_knowledge_base, parse_knowledge_base
from envmgr.errors import KnowledgeBaseError

RULE = """
tables: {{}}
sources: {{s: "a source"}}
rules:
  - id: rule-a
    severity: {severity}
    confirmed: {confirmed}
    when:
      - {clause}
    message: m
    fix: f
    source: {source}
"""


def kb_text(severity="error", confirmed="true", clause="[x, eq, 1]", source="s"):
    return textwrap.dedent(RULE).format(severity=severity, confirmed=confirmed,
                                        clause=clause, source=source)


def test_well_formed_rule_parses():
    kb = parse_knowledge_base(kb_text())
    assert kb.rule("rule-a").when[0].fact == "x"


@pytest.mark.parametrize("kwargs, fragment", [
    ({"confirmed": "false"}, "unconfirmed rule cannot be an error"),
    ({"clause": "[x, equals, 1]"}, "unknown op 'equals'"),
    ({"clause": "[x, present, 1]"}, "takes no value"),
    ({"clause": "[x, eq]"}, "takes one value"),
    ({"clause": "x"}, "a condition is"),
    ({"source": "nowhere"}, "unknown sources: ['nowhere']"),
    ({"severity": "fatal"}, "severity"),
])
def test_malformed_rule_data_is_refused(kwargs, fragment):
    with pytest.raises(KnowledgeBaseError) as info:
        parse_knowledge_base(kb_text(**kwargs))
    assert fragment in str(info.value)


def test_duplicate_ids_are_refused():
    text = kb_text() + (
        "  - id: rule-a\n    severity: info\n    when: [[x, eq, 1]]\n"
        "    message: m\n    fix: f\n    source: s\n")
    with pytest.raises(KnowledgeBaseError, match="duplicate rule ids"):
        parse_knowledge_base(text)


def test_shipped_knowledge_base_loads_and_cites_sources():
    kb = default_knowledge_base()
    assert len(kb.rules) >= 40
    for rule in kb.rules:
        assert kb.sources[rule.source]
        assert rule.message and rule.fix
