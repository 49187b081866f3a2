"""MkDocs hook: the options page's table, generated from perfsuite's own option table."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- perfsuite:options -->"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def options_table() -> str:
    """One row per option: flag and argument, ini key, default, meaning."""
    from perfsuite.options import OPTIONS

    rows = ["| option | ini key | default | meaning |", "|---|---|---|---|"]
    for flag, ini, kwargs, _ini_type, default in OPTIONS:
        metavar = kwargs.get("metavar")
        shown = f"{flag} {metavar}" if metavar else flag
        value = "off" if kwargs.get("action") == "store_const" else (default or "none")
        rows.append(
            f"| `{_cell(shown)}` | `{ini}` | `{_cell(value)}` | {_cell(kwargs.get('help', ''))} |"
        )
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker with the table."""
    if MARKER in markdown:
        return markdown.replace(MARKER, options_table())
    return markdown
