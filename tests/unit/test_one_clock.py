"""Time is read through the one injected Clock (protocol/clock.py), nowhere else.

The deterministic simulation (issue 26) drives every timer from a virtual clock; a direct
`time.monotonic()` or `loop.time()` left in a module would run on real time there, and a
`time.time()` used for a timeout would let a wall-clock step fence a broker. So this scans the
source of the layers that run in a broker or a client: outside protocol/clock.py no call of
`time.time`, `time.time_ns`, `time.monotonic`, `time.monotonic_ns` or of any `.time()` on an event
loop (`loop.time()`, `asyncio.get_running_loop().time()`). `time.perf_counter` stays allowed: it
measures how long our own code ran (metrics), which no simulated clock should change.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("protocol", "storage", "broker", "client", "pipeline")
CLOCK = ROOT / "protocol" / "clock.py"
TIME_FUNCS = {"time", "time_ns", "monotonic", "monotonic_ns"}


def _is_loop(node: ast.expr) -> bool:
    """`loop`, `self.loop`, `self._loop`, or a call of get_running_loop()/get_event_loop()."""
    if isinstance(node, ast.Name):
        return node.id in {"loop", "_loop"}
    if isinstance(node, ast.Attribute):
        return node.attr in {"loop", "_loop"}
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return name in {"get_running_loop", "get_event_loop"}
    return False


def violations(source: str, rel: str) -> list[str]:
    tree = ast.parse(source, rel)
    time_aliases = {"time"}
    from_time: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            time_aliases |= {a.asname for a in node.names if a.name == "time" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            from_time |= {a.asname or a.name for a in node.names if a.name in TIME_FUNCS}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        where = f"{rel}:{node.lineno}"
        if isinstance(f, ast.Attribute):
            if f.attr in TIME_FUNCS and isinstance(f.value, ast.Name) and f.value.id in time_aliases:
                out.append(f"{where}: time.{f.attr}()")
            elif f.attr == "time" and _is_loop(f.value):
                out.append(f"{where}: loop.time()")
        elif isinstance(f, ast.Name) and f.id in from_time:
            out.append(f"{where}: {f.id}() from time")
    return out


def test_the_scan_finds_every_way_of_reading_the_clock() -> None:
    code = (
        "import asyncio, time\n"
        "import time as t\n"
        "from time import monotonic as mono\n"
        "def f(self, loop) -> None:\n"
        "    time.time()\n"
        "    t.monotonic_ns()\n"
        "    mono()\n"
        "    loop.time()\n"
        "    asyncio.get_running_loop().time()\n"
        "    self._loop.time()\n"
        "    time.perf_counter()\n"
        "    self.clock.monotonic()\n"
        "    record.time()\n"
    )
    assert violations(code, "probe.py") == [
        "probe.py:5: time.time()",
        "probe.py:6: time.monotonic_ns()",
        "probe.py:7: mono() from time",
        "probe.py:8: loop.time()",
        "probe.py:9: loop.time()",
        "probe.py:10: loop.time()",
    ]


def test_only_the_clock_module_reads_the_system_clocks() -> None:
    found = []
    for layer in LAYERS:
        for p in sorted((ROOT / layer).rglob("*.py")):
            if p != CLOCK:
                found += violations(p.read_text(), str(p.relative_to(ROOT)))
    assert found == [], f"{len(found)} direct clock reads outside protocol/clock.py:\n" + "\n".join(found)
