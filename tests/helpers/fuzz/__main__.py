"""`python -m tests.helpers.fuzz --frames N --seed S`: a fuzzing campaign against a fresh broker
(campaign.py); prints the report as JSON and exits non-zero on any crash, hang, handler failure
or unrecoverable log. `make fuzz` runs it with FRAMES (default 1,000,000) and SEED."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from .campaign import default_workers, run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.helpers.fuzz", description=__doc__)
    p.add_argument("--frames", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=None, help="default: random (printed, to replay)")
    p.add_argument("--listeners", default="client,broker", help="of client, broker, controller")
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--dir", type=Path, default=None, help="keep the broker's data and log here")
    p.add_argument("--out", type=Path, default=None, help="also write the report (JSON) here")
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1, 2**31)
    print(f"fuzz: {a.frames:,} frames, seed {seed}, listeners {a.listeners}", flush=True)
    listeners = tuple(x.strip() for x in a.listeners.split(",") if x.strip())
    if a.dir is not None:
        a.dir.mkdir(parents=True, exist_ok=True)
        report = run(a.dir, a.frames, seed, listeners=listeners, workers=a.workers, progress=True)
    else:
        with tempfile.TemporaryDirectory(prefix="ketch-fuzz-") as d:
            report = run(Path(d), a.frames, seed, listeners=listeners, workers=a.workers, progress=True)
    text = report.summary()
    print(text)
    if a.out is not None:
        a.out.write_text(text + "\n")
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
