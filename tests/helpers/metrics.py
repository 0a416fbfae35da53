"""Read a broker's Prometheus endpoint (KETCH_METRICS_LISTEN) as a test sees it: every line
checked to be a well-formed sample with a TYPE line, the samples by name and labels."""

from __future__ import annotations

import re
import urllib.request

HOST = "127.0.0.1"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Metrics:
    def __init__(self, port: int) -> None:
        self.url = f"http://{HOST}:{port}/metrics"

    def text(self) -> str:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return str(r.read().decode())

    def scrape(self) -> Samples:
        out: Samples = {}
        types: dict[str, str] = {}
        for line in self.text().splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                types[name] = kind
                continue
            if line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            assert m, f"not a Prometheus sample line: {line!r}"
            name, labels, value = m.groups()
            family = re.sub(r"_(sum|count)$", "", name) if name not in types else name
            assert family in types, f"sample {name} without a TYPE line"
            out[(name, frozenset(_LABEL.findall(labels or "")))] = float(value)
        return out

    def value(self, name: str, **labels: str) -> float:
        return self.scrape().get((name, frozenset(labels.items())), 0.0)
