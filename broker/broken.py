"""Guarantees a test build can break on purpose, so the chaos suite proves its checker notices.
Never set this in production.

`KETCH_TEST_BREAK=<name>[,<name>...]`:

    lso      read_committed fetches are served like read_uncommitted: past the last stable offset,
             with no aborted-transaction list (readers see aborted and not-yet-committed data)
    markers  WriteTxnMarkers answers success for partition 0 of every non-internal topic without
             writing the marker (that partition's transactions hang, its LSO stops)
    acks     acks=all is answered as soon as the leader has appended, before the in-sync replicas
             have the batch (a leader that dies or is cut off loses acknowledged writes)

Read once at import; an unknown name stops the broker from starting rather than test nothing.
"""

from __future__ import annotations

import os

ENV = "KETCH_TEST_BREAK"
NAMES = frozenset({"lso", "markers", "acks"})
BROKEN = frozenset(n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip())
if BROKEN - NAMES:
    raise SystemExit(f"{ENV}: unknown guarantee(s) {sorted(BROKEN - NAMES)}; known: {sorted(NAMES)}")


def broken(name: str) -> bool:
    """Whether this process was told to break `name` (unset: always False)."""
    return name in BROKEN
