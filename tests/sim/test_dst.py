"""The whole-cluster simulation in `make test`: determinism and a fixed rotation of seeds
(docs/simulation.md; the break switches: test_dst_breaks.py).

A failing seed here replays outside pytest, with the brokers' logs:
`python -m tests.helpers.dst --seed N --seconds S --intensity I --trace`.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from tests.helpers.dst.loop import Livelock, Process, SimLoop
from tests.helpers.dst.rotation import chunks, run_chunk
from tests.helpers.dst.run import collected, simulate

ROOT = Path(__file__).resolve().parents[2]
# The rotation: 200 light seeds, a quarter here and in each of test_dst_rotation_{2,3,4}.py, so
# that pytest-xdist (--dist loadfile) spreads it over its workers; see tests/helpers/dst/rotation.py.


def test_one_seed_gives_one_run() -> None:
    """Everything a run does follows from its seed: two runs of one seed give the same history and
    event trace, byte for byte, and take the same number of steps."""
    a = simulate(7, seconds=4.0, intensity=0.25, logs=True)
    b = simulate(7, seconds=4.0, intensity=0.25, logs=True)
    assert a.steps == b.steps and a.history == b.history and a.trace == b.trace, (
        f"seed 7 ran two ways: {a.steps} vs {b.steps} steps; first difference: "
        + next((f"{x!r} / {y!r}" for x, y in zip(a.trace + a.history, b.trace + b.history, strict=False)
                if x != y), "lengths"))
    assert a.progress["acked"] > 0 and a.progress["committed"] > 0, a.summary()


def test_a_run_does_not_depend_on_where_its_objects_lie_in_memory() -> None:
    """A seed run after other work in the same process (as in a `make sim` worker) is the run
    its replay gives: nothing iterates a set of objects hashed by address. Tasks cancelled in a
    set's order did (a broker stopping cancelled its requests' tasks in memory-address order),
    and five-broker seeds 7 and 23 took one step more or fewer when unrelated objects had been
    allocated first."""
    ballast: list[object] = []
    for seed in (7, 23):
        plain = simulate(seed, seconds=6.0, intensity=0.25, size=5)
        for n in (1_000, 7_919, 50_000):
            ballast += [[i] for i in range(n)]  # shifts every later address
            shifted = simulate(seed, seconds=6.0, intensity=0.25, size=5)
            assert plain.steps == shifted.steps and plain.history == shifted.history, (
                f"seed {seed} ran two ways: {plain.steps} vs {shifted.steps} steps")
    assert ballast


def test_a_seed_replays_in_another_process() -> None:
    """The command that replays a seed gives the same run in a fresh process every time (it fixes
    PYTHONHASHSEED itself: set iteration order is part of a run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def digest() -> str:
        out = subprocess.run([sys.executable, "-m", "tests.helpers.dst", "--seed", "3", "--seconds", "3",
                              "--intensity", "0.25"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)
        assert "digest " in out.stdout, out.stdout + out.stderr
        return out.stdout.rsplit("digest ", 1)[1].strip()

    assert digest() == digest()


@pytest.mark.parametrize("first", chunks(1))
def test_the_rotation_of_seeds_finds_nothing(first: int) -> None:
    run_chunk(first)


def test_what_a_killed_process_leaves_behind_says_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """A killed broker's pending coroutines are closed when the run's garbage is collected, which
    runs their `finally` blocks: code a SIGKILLed process never runs. Whatever they log then (seed
    1019 once printed 'log directory failed ... Bad file descriptor' after its run: a writer's
    handler meeting the file the kill closed) is the harness's noise, not the run's: dropped."""
    with collected():
        loop = SimLoop(random.Random(1))
        proc = Process("broker1.1", "10.0.0.1")

        async def writer() -> None:
            try:
                await asyncio.sleep(60)
            finally:
                structlog.get_logger().error("log directory failed: its partitions are offline")

        loop.spawn(proc, writer())
        loop.run_until_complete(asyncio.sleep(1))
        loop.kill(proc)
        loop.graveyard.clear()  # the run is over: its world is garbage
        loop.close()
        del loop, proc
    out, err = capfd.readouterr()
    assert "log directory failed" not in out + err, out + err


def test_a_timer_a_few_ulps_ahead_runs_only_once_virtual_time_reaches_it() -> None:
    """asyncio runs a timer due within its clock's resolution (1 ns) of now as due already; virtual
    time must get there first. It did not: a wait for what was left before a deadline -- a few
    units in the last place of the time, as `deadline - now` leaves -- woke with time standing
    still, found the same remainder and waited for it again, forever (seed 4796 at 120 s: a
    consumer's getmany spun at one virtual instant for 45 minutes of CPU)."""
    loop = SimLoop(random.Random(1))
    deadline = math.nextafter(math.nextafter(loop.time(), math.inf), math.inf)
    waits = 0
    done = False

    async def until_deadline() -> None:
        nonlocal waits, done
        while (left := deadline - loop.time()) > 0 and waits < 100:
            waits += 1
            await asyncio.sleep(left)
        done = True

    async def busy() -> None:
        """Another task with work ready at every turn (the consumer's fetcher, woken by each
        look at its buffer): the loop is never idle, so time moves only to timers it runs."""
        while not done:
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(until_deadline(), busy())

    try:
        loop.run_until_complete(both())
    finally:
        loop.close()
    assert loop.time() == deadline and waits == 1, f"{waits} waits, time {loop.time()!r} for {deadline!r}"


def test_a_loop_of_tasks_that_never_lets_time_move_fails_the_run_instead_of_hanging_it() -> None:
    """Two tasks waking each other for ever at one virtual instant (a real process would spin its
    CPU): the loop raises Livelock after its bound of turns, so a batch reports the seed."""
    loop = SimLoop(random.Random(1))
    loop.livelock_turns = 1_000
    ping, pong = asyncio.Event(), asyncio.Event()

    async def bounce(mine: asyncio.Event, other: asyncio.Event) -> None:
        while True:
            other.set()
            await mine.wait()
            mine.clear()

    async def both() -> None:
        await asyncio.gather(bounce(ping, pong), bounce(pong, ping))

    try:
        with pytest.raises(Livelock, match="1,000 loop turns at virtual time 1000.0"):
            loop.run_until_complete(both())
    finally:
        for t in asyncio.all_tasks(loop):
            t.cancel()
        loop.close()
