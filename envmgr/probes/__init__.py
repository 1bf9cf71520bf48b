"""Capability probes: standalone scripts run inside an environment, and their runner."""
