"""The package tree's size: folders, modules, lines; large modules and long functions.

    python lab/tree_sizes.py [PACKAGE_DIR ...]     # default: perfsuite/

Counts every ``*.py`` under the package (lines as ``wc -l`` counts them), the modules over
500 and 600 lines, and the functions (``def``, methods included, nested ones apart) over
60 and 80 lines, from the ``ast`` line numbers.  Issue 64's report compares two trees.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def sizes(root: Path) -> dict[str, object]:
    modules = sorted(root.rglob("*.py"))
    lines = {m: len(m.read_text().splitlines()) for m in modules}
    functions: list[tuple[int, str]] = []
    for m in modules:
        for node in ast.walk(ast.parse(m.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((length, f"{m.relative_to(root.parent)}:{node.name}"))
    folders = {m.parent for m in modules}
    flat = [m for m in modules if m.parent == root]
    return {
        "folders": len(folders),
        "modules": len(modules),
        "lines": sum(lines.values()),
        "root modules": len(flat),
        "root lines": sum(lines[m] for m in flat),
        "modules > 500 lines": sum(n > 500 for n in lines.values()),
        "modules > 600 lines": sum(n > 600 for n in lines.values()),
        "functions > 60 lines": sum(n > 60 for n, _ in functions),
        "functions > 80 lines": sum(n > 80 for n, _ in functions),
        "largest modules": ", ".join(
            f"{m.relative_to(root.parent)} {n}"
            for m, n in sorted(lines.items(), key=lambda x: -x[1])[:6]
        ),
        "longest functions": ", ".join(f"{name} {n}" for n, name in sorted(functions)[-5:][::-1]),
    }


def main() -> None:
    roots = [Path(a) for a in sys.argv[1:]] or [Path(__file__).resolve().parents[1] / "perfsuite"]
    for root in roots:
        print(f"== {root}")
        for key, value in sizes(root).items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
