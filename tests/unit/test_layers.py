"""The house's layer order (docs/architecture.md): every import in ``src/`` runs downward.

A module may import its own package (or subpackage) and any package in a lower layer; never a
package beside it in its own layer, nor one above. Imports inside functions and under
``TYPE_CHECKING`` count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("graph_ingest.domain",),
    ("graph_ingest.settings", "graph_ingest.resilience", "graph_ingest.waiting"),
    ("graph_ingest.schemas",),
    (
        "graph_ingest.kafka",
        "graph_ingest.store",
        "graph_ingest.graph",
        "graph_ingest.planning",
        "graph_ingest.stack",
    ),
    ("graph_ingest.hooks",),
    ("graph_ingest.consumers",),
    ("graph_ingest.observability",),
    ("graph_ingest.producers",),
    ("graph_ingest.dlq", "graph_ingest.reconcile"),
    (
        "graph_ingest.consumers.applier",
        "graph_ingest.consumers.planner",
        "graph_ingest.projections",
    ),
    ("graph_ingest.api",),
    ("graph_ingest.wiring",),
    ("graph_ingest.demo",),
    ("graph_ingest.cli",),
)
"""Lowest first. The root package (``__version__``) sits below everything."""


def owner(module: str) -> tuple[int, str]:
    """The layer and the unit (the longest listed prefix) a module belongs to."""
    best: tuple[int, str] | None = None
    for level, units in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".")) and (
                best is None or len(unit) > len(best[1])
            ):
                best = (level, unit)
    if best is None:
        if module == "graph_ingest":
            return -1, module
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")
    return best


def module_name(path: Path, source: Path) -> str:
    parts = path.relative_to(source).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, source: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every graph_ingest import in the file."""
    package = module_name(path, source).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.append(
                    (node.lineno, ".".join([*base, *([node.module] if node.module else [])]))
                )
            elif node.module:
                found.append((node.lineno, node.module))
    return [(line, module) for line, module in found if module.split(".")[0] == "graph_ingest"]


def upward_imports(source: Path) -> list[str]:
    """Every import in ``source/graph_ingest`` that runs beside or above its module's layer."""
    root = source / "graph_ingest"
    wrong: list[str] = []
    for path in sorted(root.rglob("*.py")):
        level, unit = owner(module_name(path, source))
        for line, module in imported_modules(path, source):
            target_level, target_unit = owner(module)
            if target_unit == unit or target_level < level:
                continue
            where = "beside it" if target_level == level else "above it"
            wrong.append(f"{path.relative_to(root)}:{line} imports {module} ({where})")
    return wrong


def test_every_import_runs_down_the_layers() -> None:
    assert upward_imports(SOURCE) == []


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "graph_ingest"
    (package / "domain").mkdir(parents=True)
    (package / "cli").mkdir()
    (package / "domain" / "values.py").write_text("from graph_ingest.cli.main import cli\n")
    (package / "cli" / "main.py").write_text("from graph_ingest.domain import values\n")
    assert upward_imports(tmp_path) == [
        "domain/values.py:1 imports graph_ingest.cli.main (above it)"
    ]


def test_an_import_beside_in_the_same_layer_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "graph_ingest"
    (package / "kafka").mkdir(parents=True)
    (package / "store").mkdir()
    (package / "kafka" / "edge.py").write_text("from ..store import rows\n")
    (package / "store" / "rows.py").write_text("")
    assert upward_imports(tmp_path) == ["kafka/edge.py:1 imports graph_ingest.store (beside it)"]


def test_a_package_in_no_layer_is_refused() -> None:
    with pytest.raises(AssertionError, match="in no layer"):
        owner("graph_ingest.nowhere.thing")
