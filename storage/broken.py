"""Guarantees a test build can break on purpose, so the chaos suite proves its checker notices.
Never set this in production.

`KETCH_TEST_BREAK=<name>[,<name>...]`, each name one guarantee (GUARANTEES says what breaking it
does). The switches live in storage/, the lowest layer holding a guarantee to break, so a hook in
the log or the producer state reads them without storage importing the broker; broker/broken.py
announces them when a broker starts.

Read once at import; an unknown name stops the process rather than test nothing.
"""

from __future__ import annotations

import os

ENV = "KETCH_TEST_BREAK"
GUARANTEES = {
    "lso": "read_committed fetches are served like read_uncommitted: past the last stable offset, with no "
           "aborted-transaction list (readers see aborted and not-yet-committed data)",
    "markers": "WriteTxnMarkers answers success for partition 0 of every non-internal topic without writing "
               "the marker (that partition's transactions hang, its LSO stops)",
    "acks": "acks=all is answered as soon as the leader has appended, before the in-sync replicas have the "
            "batch (a leader that dies or is cut off loses acknowledged writes)",
    "dedup": "a leader skips the producer-state sequence check: a retried batch is stored again instead of "
             "being answered with its first offsets (duplicates under one producer epoch)",
    "truncate": "a leader never tells a follower that its log diverges, so the follower skips truncation and "
                "keeps records the leader does not have (replicas differ at one offset)",
    "fence": "a partition leader accepts a batch whose producer epoch is older than the newest it knows of: "
             "it ignores the coordinator's PRODUCER_FENCED verdict on a transactional batch (KIP-890 verification) "
             "and its own producer state's epoch check (a fenced zombie's writes are stored)",
    "hw": "the high watermark counts every follower as having the leader's whole log before it fetched it "
          "(records are committed, served and acknowledged that only the leader has)",
}
NAMES = frozenset(GUARANTEES)
BROKEN = frozenset(n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip())
if BROKEN - NAMES:
    raise SystemExit(f"{ENV}: unknown guarantee(s) {sorted(BROKEN - NAMES)}; known: {sorted(NAMES)}")


def broken(name: str) -> bool:
    """Whether this process was told to break `name` (unset: always False)."""
    return name in BROKEN
