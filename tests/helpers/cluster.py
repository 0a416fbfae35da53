"""Several real Ketch brokers at once: each its own process, node id, free port and data dir.

A cluster test kills, freezes and restarts brokers by node id and waits on conditions; it never
sleeps for synchronisation. Every broker is a :class:`BrokerProcess`, so a failing test's report
carries each broker's log tail (conftest) and no process outlives the test (fixture teardown, then
an atexit SIGKILL as the last line).

How brokers find each other is the broker's business, passed as arguments by ``args_for``: the
harness only owns processes, ports and directories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from .broker import HOST, BrokerError, BrokerProcess, free_port
from .wait import wait_until

ArgsFor = Callable[["Cluster", int], Sequence[str]]


class Cluster:
    """N brokers with node ids 1..N. Ports are chosen once, so a restarted broker comes back at
    the address its peers already know."""

    def __init__(
        self,
        base: Path | str,
        size: int,
        *,
        env: Mapping[str, str] | None = None,
        args_for: ArgsFor | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one broker")
        self.base = Path(base)
        self.ports = {n: free_port() for n in range(1, size + 1)}
        self.brokers: dict[int, BrokerProcess] = {}
        for node, port in self.ports.items():
            d = self.base / f"node{node}"
            self.brokers[node] = BrokerProcess(
                d / "data",
                port=port,
                env={"KETCH_NODE_ID": str(node), **(env or {})},
                log_path=d / "broker.log",
            )
        for node, b in self.brokers.items():
            b.extra_args = list(args_for(self, node)) if args_for else []

    # ---- addressing ----------------------------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return list(self.brokers)

    @property
    def bootstrap(self) -> str:
        """Every broker's address: a client given this finds the cluster while any one is up."""
        return ",".join(f"{HOST}:{p}" for p in self.ports.values())

    def __getitem__(self, node: int) -> BrokerProcess:
        return self.brokers[node]

    def __iter__(self) -> Iterator[BrokerProcess]:
        return iter(self.brokers.values())

    def running(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b.is_running() and not b.paused]

    # ---- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> Cluster:
        """Start every broker, then wait for all: brokers that need a quorum to come up must not
        be started one after another, each waiting for peers that are not there yet."""
        for b in self.brokers.values():
            b.start(timeout=timeout, wait=False)
        for b in self.brokers.values():
            b.wait_ready(timeout)
        return self

    def kill(self, node: int) -> None:
        """SIGKILL: the broker loses everything not yet written to the OS."""
        self.brokers[node].kill()

    def pause(self, node: int) -> None:
        self.brokers[node].pause()

    def resume(self, node: int) -> None:
        self.brokers[node].resume()

    def restart(self, node: int, *, kill: bool = True, timeout: float = 60.0) -> BrokerProcess:
        """Bring a broker back on its port and data dir, by SIGKILL (default) or graceful stop."""
        return self.brokers[node].restart(kill=kill, timeout=timeout)

    def wait_until(self, condition: Callable[[], object], timeout: float = 30.0, message: str = "") -> None:
        """wait_until that fails at once, with the log tail, if a broker died on its own."""

        def check() -> object:
            for b in self.brokers.values():
                if b.died_unexpectedly():
                    raise BrokerError(f"{b!r} died with exit code {b.proc.returncode if b.proc else None}\n"
                                      f"{b.log_tail()}")
            return condition()

        wait_until(check, timeout=timeout, message=message or "cluster condition")

    def close(self) -> None:
        """Stop every broker (resuming paused ones first). A broker that died on its own while
        the test believed it running, or ignores SIGTERM, is reported."""
        problems = []
        for b in self.brokers.values():
            if b.died_unexpectedly():
                problems.append(f"{b!r} died during the test with exit code "
                                f"{b.proc.returncode if b.proc else None}\n{b.log_tail()}")
            try:
                b.close()
            except BrokerError as exc:
                problems.append(str(exc))
        if problems:
            raise BrokerError("\n\n".join(problems))

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
