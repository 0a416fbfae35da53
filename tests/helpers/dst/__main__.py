"""python -m tests.helpers.dst --seed N [--seconds S] [--trace]: one simulated run, replayed from
its seed (see docs/simulation.md)."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.helpers.dst", description=__doc__)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=30.0, help="virtual seconds of faults")
    ap.add_argument("--size", type=int, default=3, help="brokers")
    ap.add_argument("--trace", action="store_true", help="print the event trace with the brokers' logs")
    ap.add_argument("--disk", choices=("sim", "os"), default="sim")
    ap.add_argument("--history", help="write the history (JSON lines) here")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":  # set iteration order is part of the replay
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.helpers.dst", *(argv or sys.argv[1:])])
    from .run import simulate
    result = simulate(args.seed, args.seconds, size=args.size, logs=args.trace, disk=args.disk)
    if args.trace:
        print("\n".join(result.trace))
    if args.history:
        with open(args.history, "w", encoding="utf-8") as f:
            f.write("\n".join(result.history) + "\n")
    if result.report is not None and not result.report.ok:
        print(result.report.render())
    print(result.summary(), f"digest {result.digest()}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
