"""N real BrokerServers in one simulated world: their machines, crashes, restarts and pauses.

A node is a machine: a host name on the simulated network, a clock, a disk. Those outlive the
broker process running on it; a crash ends the process (SIGKILL: nothing of it runs again) and,
if it is a power loss, the disk drops what was never synced (dst.disk). A restart is a new
BrokerServer on the same disk and address, as the real-process suites restart a broker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.server import BrokerServer
from storage.fs import FileSystem

from .clock import SimClock
from .loop import Process, SimLoop

CLIENT_PORT, CONTROLLER_PORT, BROKER_PORT = 9092, 9093, 9094


@dataclass
class Node:
    node_id: int
    host: str
    clock: SimClock
    fs: FileSystem
    proc: Process | None = None
    broker: BrokerServer | None = None
    starting: asyncio.Task[None] | None = None
    incarnation: int = 0
    crashes: int = 0
    paused: bool = False
    history: list[str] = field(default_factory=list)

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.alive

    @property
    def serving(self) -> bool:
        """Started (registered, unfenced, listening for clients) and not dead or paused."""
        return self.up and not self.paused and self.starting is not None and self.starting.done() \
            and not self.starting.cancelled() and self.starting.exception() is None


class SimCluster:
    def __init__(self, loop: SimLoop, size: int, make_fs: Any, overrides: dict[str, Any] | None = None,
                 trace: Any = None, root: Path = Path("/sim")) -> None:
        self.loop = loop
        self.root = root
        self.size = size
        self.overrides = overrides or {}
        self.trace = trace or (lambda *a: None)
        self.nodes: dict[int, Node] = {}
        for n in range(1, size + 1):
            clock = SimClock(loop)
            self.nodes[n] = Node(n, f"10.0.0.{n}", clock, make_fs(n, clock))
        self.voters = ",".join(f"{n}@{node.host}:{CONTROLLER_PORT}" for n, node in self.nodes.items())

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{node.host}:{CLIENT_PORT}" for node in self.nodes.values())

    def config(self, node: Node) -> BrokerConfig:
        rf = min(3, self.size)
        settings: dict[str, Any] = dict(
            node_id=node.node_id, listen=f"{node.host}:{CLIENT_PORT}",
            inter_broker_listen=f"{node.host}:{BROKER_PORT}", voters=self.voters,
            data_dir=str(self.data_dir(node.node_id)), cluster_id="ketch-sim",
            default_replication_factor=rf, min_insync_replicas=min(2, rf),
            offsets_topic_num_partitions=3, transaction_state_num_partitions=3,
            offsets_topic_replication_factor=rf, transaction_state_replication_factor=rf,
            group_initial_rebalance_delay_ms=500, transaction_abort_timed_out_interval_ms=2000,
            # a few KiB per `__consumer_offsets` partition here: small chunks make a group load
            # several decodes off the loop, each a moment for the cluster to change under it
            offsets_load_buffer_size=1024,
            log_format="json")
        settings.update(self.overrides)
        return BrokerConfig(**settings)

    # ---- processes -----------------------------------------------------------------------------------
    def start(self, n: int) -> None:
        node = self.nodes[n]
        assert not node.up, f"node {n} is running"
        node.incarnation += 1
        node.proc = Process(f"broker{n}.{node.incarnation}", node.host)
        node.paused = False
        node.broker = BrokerServer(self.config(node), node.clock, node.fs)
        node.starting = self.loop.spawn(node.proc, node.broker.start(), name=f"start-{node.proc.name}")
        self.trace("start", n, node.incarnation)

    def start_all(self) -> None:
        for n in self.nodes:
            self.start(n)

    def all_serving(self) -> bool:
        return all(node.serving for node in self.nodes.values())

    def settled(self) -> bool:
        """Every broker serves and its metadata has every broker live: a broker that has just
        started may not have applied the others' unfences yet, and answers CreateTopics from
        its own image (docs/simulation.md, found and not fixed)."""
        return self.all_serving() and all(
            node.broker is not None and len(node.broker.controller.image.live_brokers()) == self.size
            for node in self.nodes.values())

    def kill(self, n: int, *, power_loss: bool = False) -> None:
        """SIGKILL (and with `power_loss`, the unsynced page cache is gone too)."""
        node = self.nodes[n]
        assert node.proc is not None and node.broker is not None
        self.loop.kill(node.proc)
        node.broker.loop_watch.stop()  # its watchdog thread dies with the process too
        node.crashes += 1
        lost: list[str] = []
        crash = getattr(node.fs, "crash" if power_loss else "crash_process", None)
        if crash is not None:
            lost = crash(self.loop.rng) if power_loss else crash()
        self.trace("kill", n, "power-loss" if power_loss else "sigkill", f"(lost {len(lost or [])} unsynced changes)")
        for what in (lost or [])[:20]:
            self.trace("  lost", what)

    def pause(self, n: int) -> None:
        node = self.nodes[n]
        assert node.proc is not None
        self.loop.pause(node.proc)
        node.paused = True
        self.trace("pause", n)

    def resume(self, n: int) -> None:
        node = self.nodes[n]
        assert node.proc is not None
        self.loop.resume(node.proc)
        node.paused = False
        self.trace("resume", n)

    def step_clock(self, n: int, ms: int) -> None:
        self.nodes[n].clock.offset_ms += ms
        self.trace("clock", n, ms)

    def live_brokers(self) -> list[BrokerServer]:
        return [node.broker for node in self.nodes.values() if node.up and node.broker is not None]

    def data_dir(self, n: int) -> Path:
        return self.root / f"node{n}" / "data"
