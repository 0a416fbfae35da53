"""The group coordinator's state machine is three objects (membership, offsets, loading) over one
table, not one class assembled from mixins: a part reaches another only through the Protocol it
declares for it, and is handed that peer by state.py (docs/architecture.md §3)."""

from __future__ import annotations

import ast
from pathlib import Path

GROUP = Path(__file__).resolve().parents[2] / "broker" / "group"
PARTS = ("membership", "offsets", "loading")


def _tree(module: str) -> ast.Module:
    return ast.parse((GROUP / f"{module}.py").read_text())


def test_no_class_of_the_group_coordinator_inherits_from_another() -> None:
    own = {c.name for f in GROUP.glob("*.py") for c in ast.walk(ast.parse(f.read_text()))
           if isinstance(c, ast.ClassDef)}
    inherited = {(c.name, b.id) for f in GROUP.glob("*.py") for c in ast.walk(ast.parse(f.read_text()))
                 if isinstance(c, ast.ClassDef) for b in c.bases if isinstance(b, ast.Name) and b.id in own}
    assert inherited == set()


def test_a_part_imports_no_other_part() -> None:
    for part in PARTS:
        imported = {n.module for n in ast.walk(_tree(part)) if isinstance(n, ast.ImportFrom)}
        assert imported.isdisjoint(PARTS), f"{part} imports {imported & set(PARTS)}"
