"""Rendering of results: the terminal summary (and, later, HTML)."""
