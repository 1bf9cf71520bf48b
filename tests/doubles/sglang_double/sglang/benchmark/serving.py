"""TEST DOUBLE entry point: ``python -m sglang.benchmark.serving`` (sglang >= 0.5.23's name).

The same client as ``sglang.bench_serving``: the double prints one output format for both.
"""

from sglang.bench_serving import main

if __name__ == "__main__":
    main()
