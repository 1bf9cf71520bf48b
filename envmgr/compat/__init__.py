"""Compatibility knowledge base (rules as data) and its evaluator."""

from envmgr.compat.evaluate import Finding, check, evaluate
from envmgr.compat.kb import KnowledgeBase, default_knowledge_base

__all__ = ["Finding", "KnowledgeBase", "check", "default_knowledge_base", "evaluate"]
