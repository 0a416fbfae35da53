"""Test-only crash points for the transaction protocol and the replica move. Never set this in
production.

`KETCH_TEST_CRASH_AT=<point>` makes the broker SIGKILL itself the first time a *commit* (or a move
to another log directory) reaches that point, so the chaos tests can stop the protocol exactly
between two of its durable steps and check that recovery finishes the transaction, or keeps the
replica whole (POINTS says where each one is).

SIGKILL (not an exception, not a clean exit) because that is the failure being simulated: no
`finally`, no flush, no shutdown hook runs. Read once at import: an unknown point stops the
process (a typo would otherwise run a crash test that never crashes). Unset, the check costs one
comparison.
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "KETCH_TEST_CRASH_AT"
POINTS = {
    "after_prepare": "PrepareCommit is in __transaction_state, no marker has been sent",
    "after_some_markers": "a partition leader wrote the first marker of a WriteTxnMarkers request carrying "
                          "more than one partition, and not the others",
    "markers_half_sent": "the coordinator heard from one partition leader that its commit markers are written "
                         "while other partitions' are still owed",
    "before_complete": "every marker is written, CompleteCommit is not",
    "move_copying": "a replica moving to another log directory: the future log took its first batches",
    "move_swapping": "a replica moving to another log directory: the current directory is retired, the "
                     "future one is still marked future",
}
CRASH_AT = os.environ.get(ENV) or None
if CRASH_AT is not None and CRASH_AT not in POINTS:
    raise SystemExit(f"{ENV}: unknown crash point {CRASH_AT!r}; known: {sorted(POINTS)}")


def crash_point(point: str) -> None:
    """SIGKILL this process if the test hook selects `point`."""
    if point != CRASH_AT:
        return
    sys.stderr.write(f"{ENV}={point}: killing the broker now\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
