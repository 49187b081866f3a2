"""The package's sizes stay what the layout promises (docs/developing.md): small modules, short functions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "perfsuite"
MODULE_LINES = 600
FUNCTION_LINES = 80
# Declarative argument parsers: one add_argument after another, read as a table.
PARSERS = {"add_history_parser", "add_fleet_parser"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_longer_than_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MODULE_LINES
    }
    assert not long, f"split these modules (lines): {long}"


def test_no_function_is_longer_than_80_lines_but_the_argument_parsers() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES and node.name not in PARSERS:
                long[f"{path.relative_to(PACKAGE.parent)}:{node.name}"] = lines
    assert not long, f"split these functions (lines): {long}"


def test_the_parsers_let_off_are_still_there() -> None:
    names = {
        node.name
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    assert names >= PARSERS


def test_the_report_names_neither_the_session_nor_the_commands_even_for_types() -> None:
    """import-linter leaves out imports made only for type checking; this counts them."""
    named = {}
    for path in sorted((PACKAGE / "report").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.startswith(("perfsuite.session", "perfsuite.cli", "perfsuite.plugin")):
                    named[f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"] = module
    assert not named, f"the report imports upward: {named}"
