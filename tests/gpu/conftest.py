"""GPU tests run on an accelerator (the `device` tool); elsewhere they skip with the reason."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        reason = None if torch.cuda.is_available() else "no CUDA GPU visible to torch"
    except ImportError:
        reason = "torch is not installed"
    if reason:
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
