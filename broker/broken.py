"""The broker's side of the test-only break switches (storage/broken.py: KETCH_TEST_BREAK) and
crash points (txn/faults.py: KETCH_TEST_CRASH_AT). Never set either in production.

Both refuse an unknown name when imported (a typo must not run a test that tests nothing); a
broker started with either set says so, as a warning naming what it breaks, so a log read later
shows the build was broken on purpose.
"""

from __future__ import annotations

import structlog

from storage.broken import BROKEN, GUARANTEES, broken

from .txn import faults

__all__ = ["announce", "broken"]

log = structlog.get_logger(__name__)


def announce() -> None:
    """Log, at broker start, every guarantee this process was told to break."""
    for name in sorted(BROKEN):
        log.warning("test build: a guarantee is broken on purpose", env="KETCH_TEST_BREAK", broken=name,
                    what=GUARANTEES[name])
    if faults.CRASH_AT:
        log.warning("test build: the broker kills itself at a transaction step", env=faults.ENV,
                    point=faults.CRASH_AT, what=faults.POINTS[faults.CRASH_AT])
