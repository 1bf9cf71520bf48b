"""TEST DOUBLE of the ``sglang`` package -- not SGLang.

Put ``tests/doubles/sglang_double`` first on PYTHONPATH and ``python -m sglang.launch_server``,
``python -m sglang.bench_serving`` and ``python -m sglang.benchmark.serving`` resolve to this
stand-in: it replays real SGLang log lines for a chosen scenario (SGLANG_DOUBLE_SCENARIO),
serves real HTTP, and benchmarks over real HTTP. See ../README.md for what is replayed and
where every line comes from.
"""

__version__ = "0.5.9"  # the release the scenario's stack pins (FACTS.md); the double's own is n/a
