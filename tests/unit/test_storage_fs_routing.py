"""Every file operation of storage (and of the metadata log's store) goes through storage/fs.py.

The deterministic simulation (issue 26) swaps the file system for one that keeps unsynced writes
apart and drops or tears them at a simulated crash; an `os.pwrite` or `Path.unlink` left in a
storage module would bypass it, and the simulation would then test a disk that does not lose
what the real one can. So this scans the source: outside storage/fs.py, no `os.*` file call, no
builtin `open`, no `shutil`/`mmap`/`tempfile`, and none of pathlib's file methods — those names
may only be called on the injected file system, which the code always names `fs`
(`fs.unlink(...)`, `self.fs.rename(...)`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The modules whose files the simulated disk must see.
SCANNED = sorted(p for p in (ROOT / "storage").glob("*.py") if p.name != "fs.py") + [
    ROOT / "broker" / "quorum" / "store.py",
    ROOT / "broker" / "lifecycle.py",
    ROOT / "broker" / "log_dirs.py",
]
# os attributes that are not file operations.
OS_ALLOWED = {"environ", "getenv", "PathLike", "fspath", "sep", "linesep"}
FORBIDDEN_MODULES = {"shutil", "mmap", "tempfile", "io"}
# pathlib (and file object) methods that touch the disk; allowed only on the file system `fs`.
PATH_METHODS = {
    "open", "unlink", "rename", "replace", "read_bytes", "write_bytes", "read_text", "write_text",
    "mkdir", "rmdir", "touch", "stat", "lstat", "exists", "is_file", "is_dir", "iterdir", "glob",
    "rglob", "chmod", "symlink_to", "hardlink_to", "samefile", "resolve", "listdir", "fsync_dir",
    "remove_tree",
}
FS_NAMES = {"fs", "_fs"}


def _is_fs(node: ast.expr) -> bool:
    """`fs`, `self.fs`, `plog.fs`, `self._fs`: the injected file system."""
    if isinstance(node, ast.Name):
        return node.id in FS_NAMES
    return isinstance(node, ast.Attribute) and node.attr in FS_NAMES


def violations(source: str, rel: str) -> list[str]:
    tree = ast.parse(source, rel)
    out: list[str] = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in FORBIDDEN_MODULES:
                    out.append(f"{where}: import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[0]
            if node.level == 0 and mod in FORBIDDEN_MODULES:
                out.append(f"{where}: from {node.module} import ...")
            if node.level == 0 and mod == "os":
                bad = [a.name for a in node.names if a.name not in OS_ALLOWED]
                if bad:
                    out.append(f"{where}: from os import {', '.join(bad)}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr not in OS_ALLOWED:
                out.append(f"{where}: os.{node.attr}")
            elif node.value.id in FORBIDDEN_MODULES:
                out.append(f"{where}: {node.value.id}.{node.attr}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "open":
                out.append(f"{where}: builtin open()")
            elif (isinstance(func, ast.Attribute) and func.attr in PATH_METHODS and not _is_fs(func.value)
                  and not (isinstance(func.value, ast.Name) and func.value.id in ("os", *FORBIDDEN_MODULES))):
                # str.replace takes two arguments, Path.replace one: only the latter is a rename;
                # Path.read_bytes takes none (LogSegment.read_bytes(pos, size) is a pread).
                if (func.attr == "replace" and len(node.args) != 1) or (func.attr == "read_bytes" and node.args):
                    continue
                out.append(f"{where}: .{func.attr}() not on the file system")
    return sorted(set(out), key=lambda v: (int(v.split(":")[1]), v))


def test_scan_sees_direct_file_operations() -> None:
    """The scan itself can fail: a module written the old way is caught on every such line."""
    code = (
        "import os, shutil\n"
        "from pathlib import Path\n"
        "def f(p: Path, fd: int) -> None:\n"
        "    os.pwrite(fd, b'x', 0)\n"
        "    with open(p, 'rb'):\n"
        "        pass\n"
        "    p.unlink(missing_ok=True)\n"
        "    p.replace(p.with_name('q'))\n"
        "    shutil.rmtree(p)\n"
        "    'a-b'.replace('-', '_')\n"
        "    fs.unlink(p)\n"
        "    self.fs.rename(p, p)\n"
        "    os.environ.get('X')\n"
        "    p.read_bytes()\n"
        "    seg.read_bytes(0, 10)\n"
    )
    assert violations(code, "probe.py") == [
        "probe.py:1: import shutil",
        "probe.py:4: os.pwrite",
        "probe.py:5: builtin open()",
        "probe.py:7: .unlink() not on the file system",
        "probe.py:8: .replace() not on the file system",
        "probe.py:9: shutil.rmtree",
        "probe.py:14: .read_bytes() not on the file system",
    ]


def test_storage_does_file_io_only_through_the_file_system() -> None:
    found = [v for p in SCANNED for v in violations(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], "file operations outside storage/fs.py:\n" + "\n".join(found)
