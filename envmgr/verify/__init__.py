"""Verify realized environments against their spec with testinfra checks.

``checks_for`` (pure) turns a spec and optional lock into ``Check``s; ``evaluate`` runs one
on a testinfra host; ``verify`` connects by testinfra URL and evaluates them all;
``envmgr.verify.plugin`` does the same as pytest tests (``pytest -p envmgr.verify.plugin``).
"""

from envmgr.verify.checks import Check, CheckResult, checks_for, evaluate
from envmgr.verify.run import verify, verify_hosts

__all__ = ["Check", "CheckResult", "checks_for", "evaluate", "verify", "verify_hosts"]
