"""The house's size limits (issue 17): a long body is a list of steps waiting for names.

No function in ``src/`` over 60 lines (``def`` to its last line) unless it is a declarative table
listed below; no module over 400 lines; the median module at most 120 lines.
"""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "graph_ingest"

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
MAX_MEDIAN_MODULE_LINES = 120

DECLARATIVE_TABLES: frozenset[str] = frozenset()
"""``path:function`` of bodies that are one table (a literal mapping or list), not steps."""


def module_lengths(package: Path) -> dict[str, int]:
    return {
        str(path.relative_to(package)): len(path.read_text().splitlines())
        for path in sorted(package.rglob("*.py"))
    }


def long_functions(package: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{path.relative_to(package)}:{node.name}"
                if length > MAX_FUNCTION_LINES and name not in DECLARATIVE_TABLES:
                    found.append(f"{name} ({length} lines)")
    return found


def test_no_function_is_longer_than_sixty_lines() -> None:
    assert long_functions(PACKAGE) == []


def test_no_module_is_longer_than_four_hundred_lines() -> None:
    too_long = {name: n for name, n in module_lengths(PACKAGE).items() if n > MAX_MODULE_LINES}
    assert too_long == {}


def test_the_median_module_is_short() -> None:
    assert statistics.median(module_lengths(PACKAGE).values()) <= MAX_MEDIAN_MODULE_LINES


def test_a_long_function_is_reported(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "steps.py").write_text(f"def steps() -> None:\n{body}\n")
    assert long_functions(tmp_path) == [f"steps.py:steps ({MAX_FUNCTION_LINES + 1} lines)"]
