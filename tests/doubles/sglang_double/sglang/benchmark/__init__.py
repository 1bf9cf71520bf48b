"""TEST DOUBLE of ``sglang.benchmark`` (where sglang >= 0.5.23 keeps its serving benchmark)."""
