"""Prepared transactions (KIP-939) driven from processes of their own, as a two-phase-commit
application runs them: one process prepares a transaction with the bundled client and reports
its token, to be SIGKILLed; another completes it from the token alone.

    proc, token = start_preparer(bootstrap, "tid", "topic", 20)
    kill(proc)
    assert complete_elsewhere(bootstrap, token, commit=True)

Run as a script (by those functions), it is that application: `prepare` or `complete`.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))

from client import PreparedTransaction, Producer  # noqa: E402

WORKER = [sys.executable, str(Path(__file__).resolve())]


def values(tid: str, n: int) -> list[bytes]:
    """What the preparer writes: n records, each naming its transactional id and number."""
    return [f"{tid}-{i}".encode() for i in range(n)]


def start_preparer(bootstrap: str, tid: str, topic: str, n: int, *, partitions: int = 2,
                   timeout_ms: int = 1_000, within: float = 30.0) -> tuple[subprocess.Popen[str], PreparedTransaction]:
    """A process that writes `values(tid, n)` over `partitions` of `topic` in one transaction of a
    2PC producer (its transaction timeout `timeout_ms`), prepares it, prints the token and stays
    alive, doing nothing, until it is killed. Returns it and the token."""
    proc = subprocess.Popen([*WORKER, "prepare", bootstrap, tid, topic, str(n), str(partitions), str(timeout_ms)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, min(left, 0.5)))
        if ready:
            line = proc.stdout.readline()
            if line:
                return proc, PreparedTransaction.from_json(line)
        if proc.poll() is not None or left <= 0:
            kill(proc)
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the preparer printed no token (exit {proc.returncode}): {err[-2000:]}")


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL, and reap it."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def complete_elsewhere(bootstrap: str, token: PreparedTransaction, *, commit: bool) -> bool:
    """Complete the prepared transaction from a process of its own that knows only the token:
    what Producer.complete_transaction answered there."""
    out = subprocess.run([*WORKER, "complete", bootstrap, token.to_json(), "commit" if commit else "abort"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return bool(json.loads(out.stdout.strip().splitlines()[-1])["completed"])


async def _prepare(bootstrap: str, tid: str, topic: str, n: int, partitions: int, timeout_ms: int) -> None:
    async with Producer(bootstrap, transactional_id=tid, enable_2pc=True, transaction_timeout_ms=timeout_ms) as p:
        await p.init_transactions()
        await p.begin_transaction()
        for i, v in enumerate(values(tid, n)):
            await p.send(topic, v, partition=i % partitions)
        token = await p.prepare_transaction()
        print(token.to_json(), flush=True)
        await asyncio.Event().wait()  # prepared: wait to be killed


async def _complete(bootstrap: str, token: PreparedTransaction, commit: bool) -> None:
    async with Producer(bootstrap, transactional_id=token.transactional_id, enable_2pc=True) as p:
        done = await p.complete_transaction(token, commit=commit)
    print(json.dumps({"completed": done}), flush=True)


def main(argv: list[str]) -> None:
    if argv[0] == "prepare":
        bootstrap, tid, topic, n, partitions, timeout_ms = argv[1:]
        asyncio.run(_prepare(bootstrap, tid, topic, int(n), int(partitions), int(timeout_ms)))
    elif argv[0] == "complete":
        bootstrap, token, how = argv[1:]
        asyncio.run(_complete(bootstrap, PreparedTransaction.from_json(token), how == "commit"))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
