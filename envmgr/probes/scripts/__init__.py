"""Probe scripts: each is standalone (stdlib + what it probes) and defines PROBE and probe(args)."""
