"""Rendering results for people (terminal tables; later HTML and plots)."""
