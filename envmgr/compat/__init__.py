"""Compatibility knowledge base (rules as data) and its evaluator."""

from envmgr.compat.evaluate import check, evaluate
from envmgr.compat.kb import KnowledgeBase, default_knowledge_base
from envmgr.findings import Finding

__all__ = ["Finding", "KnowledgeBase", "check", "default_knowledge_base", "evaluate"]
