"""A 3-broker Ketch cluster as a benchmark target: what replication (RF 3, acks=all) costs.

Three ``python -m broker broker`` processes on this machine, one metadata quorum over their
controller listeners, every benchmark topic created with replication factor 3 and
``min.insync.replicas=2``. The benchmark's clients bootstrap from all three and produce to each
partition's leader; with acks=all every produce waits until the partition's in-sync followers have
fetched the batch. The brokers share the machine's cores with each other and with the client, so
the figures say what replication costs here, not how a cluster scales.

This module does not use the tests' cluster harness (bench/ stands alone); it waits on conditions
with deadlines, never for a fixed time, and removes its processes and directories even on failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, NewTopic, ResourceType

from .targets import QUIET, REPO_ROOT, Target, free_port, log

HOST = "127.0.0.1"
POLL_S = 0.1  # interval between checks of a condition that has a deadline


@dataclass
class _Node:
    """One broker process of the cluster; its port never changes while the cluster lives."""

    node_id: int
    port: int
    dir: Path
    metrics_port: int = 0  # its /metrics endpoint, when asked for (0: none)
    proc: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _accepts(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
        return True
    except OSError:
        return False


class KetchCluster(Target):
    """`size` Ketch brokers in one quorum; topics get `size` replicas and min.insync.replicas
    `min_insync`, so that acks=all waits for followers and a topic stays writable only while a
    quorum of its replicas is in sync (as Kafka deployments usually configure it)."""

    name = "ketch-3"

    def __init__(
        self,
        partitions: int,
        env: dict[str, str] | None = None,
        *,
        size: int = 3,
        min_insync: int = 2,
        start_timeout: float = 120,
        repo: Path = REPO_ROOT,
        metrics: bool = False,
    ) -> None:
        """`start_timeout` is generous: three Python brokers starting together on two shared cores
        need several heartbeats (2 s each) before all are registered and unfenced. `metrics`: each
        broker serves /metrics on a port of its own (`_Node.metrics_port`)."""
        if size < 1 or not 1 <= min_insync <= size:
            raise ValueError(f"need 1 <= min_insync ({min_insync}) <= size ({size})")
        self.name = f"ketch-{size}"
        self.size = size
        self.min_insync = min_insync
        self.partitions = partitions
        self.dir = Path(tempfile.mkdtemp(prefix="ketch-bench-cluster-"))
        self._topics: list[str] = []
        self.nodes = [_Node(n, free_port(), self.dir / f"node{n}", free_port() if metrics else 0)
                      for n in range(1, size + 1)]
        self.bootstrap = ",".join(n.address for n in self.nodes)
        self._voters = ",".join(f"{n.node_id}@{HOST}:{free_port()}" for n in self.nodes)
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(repo), **(env or {})}
        self._repo = repo
        try:
            for node in self.nodes:
                node.dir.mkdir(parents=True)
                self.start_node(node)
            # All started before any is waited for: none can be ready without a quorum of peers.
            self._wait(self._every_broker_lists_all, start_timeout, f"every broker to list all {size}")
        except BaseException:
            self.close()
            raise

    def start_node(self, node: _Node) -> None:
        """Start `node`'s broker process (again, after `kill_node`: on the same ports and data)."""
        if node.log_file is None or node.log_file.closed:
            node.log_file = open(node.log_path, "ab")  # noqa: SIM115 - closed in close()
        cmd = [
            sys.executable, "-m", "broker", "broker",
            "--node-id", str(node.node_id),
            "--listen", node.address, "--advertise", node.address,
            "--voters", self._voters,
            "--data-dir", str(node.dir / "data"),
        ]  # fmt: skip
        if node.metrics_port:
            cmd += ["--metrics-listen", f"{HOST}:{node.metrics_port}"]
        node.proc = subprocess.Popen(
            cmd,
            cwd=self._repo,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=node.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C reaches only the bench, whose close() stops them
        )

    def kill_node(self, node: _Node, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        """Signal `node`'s broker and wait for it to exit; its data stays for `start_node`."""
        if node.proc is not None and node.alive():
            node.proc.send_signal(sig)
            node.proc.wait(timeout)

    # ---- readiness ------------------------------------------------------------------------------
    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `condition` until it holds; fail at once, with the logs, if a broker died."""
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n in self.nodes if not n.alive()]
            if dead:
                codes = ", ".join(f"node {n.node_id}: {n.proc.returncode if n.proc else None}" for n in dead)
                raise RuntimeError(f"{self.name}: broker exited while waiting for {what} ({codes})\n"
                                   f"{self.log_tail()}")
            if condition():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: timed out after {timeout}s waiting for {what}\n"
                                   f"{self.log_tail()}")
            time.sleep(POLL_S)

    def _metadata(self, node: _Node, topic: str | None = None) -> ClusterMetadata | None:
        """`node`'s own answer: a fresh client bootstrapped from that node only asks it first."""
        try:
            return AdminClient({"bootstrap.servers": node.address, **QUIET}).list_topics(topic=topic, timeout=2)
        except KafkaException:
            return None

    def _every_broker_lists_all(self) -> bool:
        """Metadata lists registered, unfenced brokers; a controller id means a quorum leader."""
        if not all(_accepts(n.port) for n in self.nodes):
            return False  # not yet listening: spare librdkafka's connection-refused log lines
        want = {n.node_id for n in self.nodes}
        for node in self.nodes:
            md = self._metadata(node)
            if md is None or set(md.brokers) != want or md.controller_id < 0:
                return False
        return True

    def _topic_settled(self, topic: str) -> bool:
        """Every broker shows every partition with a leader, all replicas and all of them in sync,
        and they agree on the leaders: a produce can start without NOT_LEADER retries, and the
        first acks=all waits for every follower."""
        views = []
        for node in self.nodes:
            md = self._metadata(node, topic)
            t = md.topics.get(topic) if md is not None else None
            if t is None or t.error is not None or len(t.partitions) != self.partitions:
                return False
            for p in t.partitions.values():
                if p.error is not None or p.leader < 0 or len(p.replicas) != self.size or len(p.isrs) != self.size:
                    return False
            views.append({i: p.leader for i, p in t.partitions.items()})
        return all(v == views[0] for v in views)

    # ---- Target ---------------------------------------------------------------------------------
    def prepare_topic(self, topic: str, timeout: float = 60) -> None:
        client = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})  # outlives its futures
        futs = client.create_topics(
            [NewTopic(topic, num_partitions=self.partitions, replication_factor=self.size,
                      config={"min.insync.replicas": str(self.min_insync)})],
            request_timeout=timeout,
        )  # fmt: skip
        for f in futs.values():
            f.result(timeout)
        self._wait(lambda: self._topic_settled(topic), timeout, f"every broker to agree on {topic}'s layout")
        self._topics.append(topic)

    def replication_report(self) -> dict[str, Any]:
        """The ISR of the last topic after its run: had a follower dropped out, acks=all would have
        waited for fewer replicas than the figures claim."""
        if not self._topics:
            return {}
        topic = self._topics[-1]
        report: dict[str, Any] = {
            "brokers": self.size,
            "replication_factor": self.size,
            "min_insync_replicas": self._topic_config(topic, "min.insync.replicas"),
        }
        md = self._metadata(self.nodes[0])  # every topic: the internal ones too, never auto-created
        t = md.topics.get(topic) if md is not None else None
        if md is None or t is None or t.error is not None:
            report["isr_after"] = "unknown (metadata not available)"
            return report
        report["isr_sizes_after"] = sorted(len(p.isrs) for p in t.partitions.values())
        leaders = Counter(p.leader for p in t.partitions.values())
        report["leaders_per_broker"] = {str(b): leaders.get(b, 0) for b in sorted(md.brokers)}
        # A transaction's coordinator appends to __transaction_state and waits for its ISR too.
        txn_state = md.topics.get("__transaction_state")
        if txn_state is not None and txn_state.error is None and txn_state.partitions:
            report["transaction_state_replicas"] = min(len(p.replicas) for p in txn_state.partitions.values())
        return report

    def _topic_config(self, topic: str, key: str) -> str | None:
        """The value the brokers hold, not the one asked for: proof the setting took effect."""
        client = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        try:
            futs = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=10)
            for f in futs.values():
                entry = f.result(10).get(key)
                return None if entry is None else str(entry.value)
        except KafkaException:
            pass
        return None

    def broker_pids(self) -> list[int]:
        return [n.proc.pid for n in self.nodes if n.proc is not None]

    def log_tail(self, n: int = 40) -> str:
        """The last `n` lines of every broker, each marked with its node id."""
        out = []
        for node in self.nodes:
            if node.log_file is not None and not node.log_file.closed:
                node.log_file.flush()
            try:
                lines = node.log_path.read_bytes().decode("utf-8", "replace").splitlines()[-n:]
            except OSError:
                continue
            out += [f"[node {node.node_id}] {line}" for line in lines]
        return "\n".join(out)

    def close(self, timeout: float = 30) -> None:
        """SIGTERM to all at once (each hands its leaderships over, at most a few seconds), then
        SIGKILL to the process group of any still running at the deadline; the directory goes."""
        for node in self.nodes:
            if node.proc is not None and node.alive():
                node.proc.send_signal(signal.SIGTERM)
            elif node.proc is not None and node.proc.returncode not in (None, 0, -signal.SIGTERM):
                log(f"{self.name}: node {node.node_id} had exited on its own with {node.proc.returncode}")
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{self.name}: node {node.node_id} ignored SIGTERM for {timeout}s; killing it")
                try:
                    os.killpg(node.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                node.proc.wait(10)
        for node in self.nodes:
            if node.log_file is not None and not node.log_file.closed:
                node.log_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)
