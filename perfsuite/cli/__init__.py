"""The ``perfsuite`` command: one module per command, each a thin shell over the rooms."""

from perfsuite.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
