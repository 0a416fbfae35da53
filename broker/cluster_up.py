"""`ketch cluster up -n N`: N broker processes on this machine forming one metadata quorum.

Node i listens for clients on base-port + i - 1 and on base-port + 100 + i - 1 for the quorum
(its controller listener), keeps its data in DATA_DIR/node-i, and is started with the same
`--voters` list as the others. Their logs are streamed with a `[node i]` prefix; Ctrl-C (or
SIGTERM) stops them all, cleanly, and the command waits for them. A broker that dies on its own
stops the others and makes the command exit non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

CONTROLLER_PORT_OFFSET = 100


def _commands(n: int, base_port: int, data_dir: Path, host: str) -> dict[int, list[str]]:
    voters = ",".join(f"{i}@{host}:{base_port + CONTROLLER_PORT_OFFSET + i - 1}" for i in range(1, n + 1))
    return {i: [sys.executable, "-m", "broker", "broker", "--node-id", str(i),
                "--listen", f"{host}:{base_port + i - 1}", "--data-dir", str(data_dir / f"node-{i}"),
                "--voters", voters] for i in range(1, n + 1)}


async def _pump(node: int, stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        sys.stdout.write(f"[node {node}] {line.decode(errors='replace')}")
        sys.stdout.flush()


async def up(n: int, base_port: int, data_dir: Path, host: str) -> int:
    procs: dict[int, asyncio.subprocess.Process] = {}
    pumps = []
    for node, cmd in _commands(n, base_port, data_dir, host).items():
        p = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT)
        procs[node] = p
        assert p.stdout is not None
        pumps.append(asyncio.create_task(_pump(node, p.stdout)))
    bootstrap = ",".join(f"{host}:{base_port + i - 1}" for i in range(1, n + 1))
    print(f"ketch cluster: {n} brokers, bootstrap {bootstrap} (Ctrl-C stops them)", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waits = {asyncio.create_task(p.wait()): node for node, p in procs.items()}
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *waits], return_when=asyncio.FIRST_COMPLETED)
    died = [waits[t] for t in done if t in waits]
    for p in procs.values():
        if p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs.values())), 30)
    except TimeoutError:
        for p in procs.values():
            if p.returncode is None:
                p.kill()
        await asyncio.gather(*(p.wait() for p in procs.values()))
    await asyncio.gather(*pumps, return_exceptions=True)
    if died:
        print(f"ketch cluster: node {died[0]} exited on its own; stopped the others", file=sys.stderr)
        return 1
    print("ketch cluster: stopped", flush=True)
    return 0


def add_parser(csub: Any) -> None:
    """`up` under `ketch cluster` (its other subcommands are the client's: client/admin_cli/)."""
    u = csub.add_parser("up", help="start N local brokers forming one metadata quorum")
    u.add_argument("-n", type=int, default=3, help="how many brokers (default 3)")
    u.add_argument("--data-dir", default="./cluster", help="their data, one directory each (default ./cluster)")
    u.add_argument("--base-port", type=int, default=9092, help="node i listens on base-port + i - 1 (default 9092)")
    u.add_argument("--host", default="127.0.0.1")
    u.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        print("error: -n must be at least 1", file=sys.stderr)
        return 2
    return asyncio.run(up(args.n, args.base_port, Path(args.data_dir), args.host))
