"""The ``perfsuite`` command: one module per command, each a thin shell over the rooms."""

from perfsuite.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
