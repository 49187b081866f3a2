"""The documentation names what the code has: every module, every option."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from perfsuite.options import OPTIONS

ROOT = Path(__file__).resolve().parents[1]


def _hook() -> object:
    spec = importlib.util.spec_from_file_location("docs_options", ROOT / "docs/hooks/options.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_developing_page_names_every_module() -> None:
    page = (ROOT / "docs" / "developing.md").read_text()
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "perfsuite").rglob("*.py"))
    missing = [m for m in modules if f"`{m}`" not in page]
    assert not missing, f"docs/developing.md does not name {missing}"


def test_the_options_page_is_generated_from_the_option_table() -> None:
    hook = _hook()
    page = (ROOT / "docs" / "options.md").read_text()
    built = hook.on_page_markdown(page, None, None, None)  # type: ignore[attr-defined]
    assert hook.MARKER in page and hook.MARKER not in built  # type: ignore[attr-defined]
    for flag, ini, *_ in OPTIONS:
        assert f"`{flag}" in built and f"`{ini}`" in built, flag


def test_the_readme_is_one_screen_of_loops_and_links() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in ("docs/ci.md", "docs/verdicts.md", "lab/measurements.md"):
        assert f"]({target}" in readme and (ROOT / target).exists(), target
