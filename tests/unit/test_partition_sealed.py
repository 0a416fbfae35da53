"""Only broker/partition/ touches a Partition's log and replica state.

Partition is the one way into a replica's log: the rules every caller must follow (epoch fencing,
the high watermark as read bound, waking parked fetches when the log start moves) hold only if
nobody goes around it. So this scans the broker's modules outside broker/partition/ for
`.log`, `.state`, `._log` or `._state` on a name the code types as a Partition: a parameter,
variable or attribute annotated `Partition` anywhere in broker/ makes that name a Partition's in
every module (`p`, `part`, `partition`, `self.part`). Tests may look inside; the broker may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker"
INSIDE = BROKER / "partition"
SEALED = {"log", "state", "_log", "_state"}


def _is_partition(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Partition":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"\bPartition\b", node.value):
            return True
    return False


def partition_names(trees: list[ast.Module]) -> set[str]:
    """The names (and attribute names) annotated as a Partition somewhere."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and _is_partition(node.annotation):
                names.add(node.arg)
            elif isinstance(node, ast.AnnAssign) and _is_partition(node.annotation):
                t = node.target
                names.add(t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "")
    return names - {""}


def violations(tree: ast.Module, rel: str, names: set[str]) -> list[str]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in SEALED:
            continue
        base = node.value
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        if name in names:
            out.append((node.lineno, f"{rel}:{node.lineno}: {name}.{node.attr}"))
    return [v for _, v in sorted(out)]


def _outside() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p))
            for p in sorted(BROKER.rglob("*.py")) if INSIDE not in p.parents}


def test_nothing_outside_broker_partition_touches_its_log_or_replica_state() -> None:
    trees = _outside()
    names = partition_names(list(trees.values()))
    assert {"p", "part", "partition"} <= names  # the scan knows what the broker calls its partitions
    found = [v for rel, tree in trees.items() for v in violations(tree, rel, names)]
    assert not found, "a Partition's log or replica state used outside broker/partition/:\n" + "\n".join(found)


def test_the_scan_sees_a_partition_used_from_outside() -> None:
    tree = ast.parse(
        "def f(part: Partition, g: Group) -> None:\n"
        "    part.log.closed\n"
        "    g.state\n"
        "class M:\n"
        "    part: 'Partition | None'\n"
        "    def run(self) -> None:\n"
        "        self.part._state.role\n")
    names = partition_names([tree])
    assert names == {"part"}
    assert violations(tree, "m.py", names) == ["m.py:2: part.log", "m.py:7: part._state"]
