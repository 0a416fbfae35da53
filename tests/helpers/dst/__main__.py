"""The simulator's command line (docs/simulation.md).

    python -m tests.helpers.dst --seed N [--seconds S] [--trace]    one run, replayed from its seed
    python -m tests.helpers.dst --seeds 1-10000 [--jobs J]          many, in parallel: the failing seeds

A seed replays exactly only under the same PYTHONHASHSEED (set iteration order is part of a run),
so this command re-executes itself with PYTHONHASHSEED=0 when it is not already set that way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from multiprocessing import Pool
from typing import Any

from .nemesis import KINDS


def _one(job: tuple[int, float, int, str, str, float, tuple[str, ...]]) -> tuple[int, bool, str, float]:
    """(seed, ok, summary, virtual seconds the run simulated)."""
    from .run import simulate
    seed, seconds, size, disk, breaks, intensity, faults = job
    try:
        result = simulate(seed, seconds, size=size, disk=disk, breaks=breaks, intensity=intensity, faults=faults)
    except Exception as e:  # noqa: BLE001 - a harness error is a failing seed too, reported by number
        return seed, False, f"seed {seed}: harness error {e!r}", 0.0
    return seed, result.ok, f"{result.summary()} digest {result.digest()}", result.virtual_s


def _kinds(spec: str) -> tuple[str, ...]:
    kinds = tuple(k for k in spec.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    return kinds


def _sizes(spec: str) -> tuple[int, ...]:
    """"3" or "3,3,3,5": the cluster sizes seeds take in turn (a quarter of the runs with five
    brokers, where two can be away while the quorum still decides: docs/simulation.md)."""
    return tuple(int(n) for n in spec.split(","))


def _size(sizes: tuple[int, ...], seed: int) -> int:
    return sizes[seed % len(sizes)]


def _seeds(spec: str) -> list[int]:
    """"1-100" or "1,5,9-12"; a bare count "10000" means seeds 1 to 10000 (`make sim SEEDS=10000`)."""
    if spec.isdigit():
        return list(range(1, int(spec) + 1))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.helpers.dst", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="one run, with its summary (and --trace)")
    which.add_argument("--seeds", help="many runs: 1-100, 1,5,9-12, or a count N (seeds 1..N); prints the failing seeds")
    ap.add_argument("--seconds", type=float, default=30.0, help="virtual seconds of faults per run")
    ap.add_argument("--size", type=_sizes, default=(3,),
                    help="brokers; a list such as 3,3,3,5 gives seed N the size at N modulo its length")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes (--seeds)")
    ap.add_argument("--trace", action="store_true", help="print the event trace with the brokers' logs")
    ap.add_argument("--disk", choices=("sim", "os"), default="sim")
    ap.add_argument("--break", dest="breaks", default="", help="break switches (storage/faults.py), comma-separated")
    ap.add_argument("--intensity", type=float, default=1.0, help="workload rate (1: ~70 sends, ~20 transactions a second)")
    ap.add_argument("--faults", default=",".join(KINDS), help=f"fault kinds, comma-separated (default all: {','.join(KINDS)})")
    ap.add_argument("--history", help="write the history (JSON lines) here")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.helpers.dst", *(argv or sys.argv[1:])])
    if args.seeds:
        return _many(args)
    from .run import simulate
    result = simulate(args.seed, args.seconds, size=_size(args.size, args.seed), logs=args.trace, disk=args.disk, breaks=args.breaks,
                      intensity=args.intensity, faults=_kinds(args.faults))
    if args.trace:
        print("\n".join(result.trace))
    if args.history:
        with open(args.history, "w", encoding="utf-8") as f:
            f.write("\n".join(result.history) + "\n")
    if result.report is not None and not result.report.ok:
        print(result.report.render())
    print(result.summary(), f"digest {result.digest()}")
    return 0 if result.ok else 1


def _many(args: Any) -> int:
    seeds = _seeds(args.seeds)
    jobs = [(s, args.seconds, _size(args.size, s), args.disk, args.breaks, args.intensity, _kinds(args.faults)) for s in seeds]
    failed: list[int] = []
    t0 = time.monotonic()
    simulated = 0.0
    with Pool(args.jobs, maxtasksperchild=20) as pool:
        for seed, ok, summary, virtual_s in pool.imap_unordered(_one, jobs):
            simulated += virtual_s
            if not ok:
                failed.append(seed)
                print(summary, flush=True)
    took = time.monotonic() - t0
    print(f"{len(seeds)} seeds x {args.seconds:.0f} virtual s of faults in {took:.0f} s with {args.jobs} processes: "
          f"{len(failed)} failed{': ' + ' '.join(map(str, sorted(failed))) if failed else ''}; "
          f"{simulated / 60:.0f} simulated cluster-minutes (start to settled)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
