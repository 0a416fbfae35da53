"""A short fuzzing campaign in the default suite (the long one: `make fuzz`, docs/security.md):
a few thousand seeded malformed frames of every API and version against a real broker, with no
crash, no hang, no handler raising, bounded RSS, and the checked log intact after a SIGKILL."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.fuzz.campaign import run

SEED = int(os.environ.get("FUZZ_SEED", "27"))  # a failure replays: python -m tests.helpers.fuzz --seed N
FRAMES = int(os.environ.get("FUZZ_FRAMES", "4000"))


def test_a_short_fuzzing_campaign_finds_nothing(tmp_path: Path) -> None:
    report = run(tmp_path, FRAMES, SEED, workers=8, records=500)
    assert report.ok(), report.summary()
    assert report.frames_sent == FRAMES and report.probes >= 1
    assert report.rss_max_kib - report.rss_start_kib < 100 * 1024, report.summary()
