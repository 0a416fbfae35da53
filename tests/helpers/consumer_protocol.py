"""A confluent-kafka consumer with `group.protocol=consumer` (KIP-848) in its own thread, as a real
application runs one: poll, process (record), commit synchronously, repeat. The test thread watches
what it consumed and what it owns."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException

from .broker import REPO_ROOT
from .confluent import QUIET

# the broker's heartbeat interval for these tests: a partition revoked by one member reaches the
# next on that member's next heartbeat
FAST_CONSUMER_GROUPS = {"KETCH_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "300",
                        "KETCH_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "10000"}

Polled = tuple[str, int, int, bytes]  # topic, partition, offset, value


class ProtocolConsumer(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str = "member", **conf: Any) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.group, self.topics, self.conf = bootstrap, group, topics, conf
        self.lock = threading.Lock()
        self.consumed: list[Polled] = []
        self.assigned: set[tuple[str, int]] = set()
        self.history: list[set[tuple[str, int]]] = []  # each assignment it held, in turn
        self.commit_errors: list[str] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def assignment(self) -> set[tuple[str, int]]:
        with self.lock:
            return set(self.assigned)

    def count(self) -> int:
        with self.lock:
            return len(self.consumed)

    def close(self) -> None:
        self.stopping.set()
        self.join(60)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error!r}") from self.error

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by close()
            self.error = e

    def _run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                      **QUIET, **self.conf})
        try:
            c.subscribe(self.topics)
            while not self.stopping.is_set():
                out = []
                for m in c.consume(200, 0.2):
                    if m.error():
                        raise KafkaException(m.error())
                    out.append((m.topic(), m.partition(), m.offset(), m.value()))
                if out:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException as e:  # a rebalance took the partitions: they are read again
                        with self.lock:
                            self.commit_errors.append(str(e))
                with self.lock:
                    self.consumed.extend(out)
                    self.assigned = {(tp.topic, tp.partition) for tp in c.assignment()}
                    if not self.history or self.history[-1] != self.assigned:
                        self.history.append(self.assigned)
        finally:
            c.close()


def describe_group(bootstrap: str, group: str) -> dict[str, Any]:
    """`ketch group describe --json` of one group: its type, state, epochs, members and assignments."""
    r = subprocess.run([sys.executable, "-m", "broker", "group", "describe", group, "--json",
                        "--bootstrap", bootstrap], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    [d] = json.loads(r.stdout)
    return d  # type: ignore[no-any-return]
