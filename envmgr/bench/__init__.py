"""Benchmarks of SGLang configs per environment: launch, triage of server logs, load, reports."""
