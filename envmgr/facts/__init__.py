"""What a target has now: driver, GPUs, toolkits, nvcc/ptxas, python packages, env.

Each fact is a constant command (``collect``) plus a pure parser (``parsers``).
"""

from envmgr.facts.collect import collect_facts
from envmgr.facts.model import Facts

__all__ = ["Facts", "collect_facts"]
