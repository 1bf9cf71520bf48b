"""Backends: where an environment lives (local host, venv, container, fleet)."""
