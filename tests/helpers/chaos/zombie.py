"""The chaos workload's zombie: a transactional producer that is fenced and goes on anyway.

A real zombie is an instance of an application whose successor (same transactional.id) has called
init_transactions: its requests still in flight, or sent before it learns of the fence, reach the
brokers under the old producer epoch. No librdkafka client does that on purpose, and none of the
workload's reaches the partition leader's epoch check (a librdkafka zombie learns of the fence from
its next coordinator request and stops), so this one speaks the protocol itself (helpers.txn) and
does exactly what a zombie's late requests would, after its successor's InitProducerId answered:

1. instance k commits a transaction over the three partitions of its topic, writing to 0 and 1 (a
   ``txn`` line, judged like the mixed workload's: committed values must survive, and so on);
2. it opens another transaction over partitions 0 and 2 and writes one value to 0 (a ``txn`` line
   with outcome ``abort``: nobody ever commits it, its successor's InitProducerId aborts it);
3. instance k+1 calls InitProducerId (the fence; its answer carries a newer epoch);
4. instance k, the zombie, sends Produce straight to each partition's leader under its old epoch,
   each with the next sequence of that epoch in that partition, and then EndTxn(commit). What
   stands in its way differs per partition:

   - 2: a write in flight when the fence came (the zombie's first there: sequence 0); the abort
     marker gave the leader's producer state the newer epoch, so both the coordinator's KIP-890
     verification and the leader's epoch check refuse it;
   - 1: not in the aborted transaction, so the leader's producer state still holds the zombie's
     epoch; only the verification refuses it;
   - 0: the zombie's own transaction, which the fence aborted; the verification refuses it, and
     the leader's sequence check would too (a sequence other than 0 under an epoch that is not
     the current one).

   All of it is recorded in a ``fence`` line; the checker's ``fenced-write`` rule says none of it
   may be stored or committed;
5. instance k+1 carries on from 1 (its committed transaction's markers also close, in a broken
   build, whatever the zombie's writes opened).

Requests a fault swallows are retried on a new connection with the same sequence (as clients do;
the leader deduplicates), within a deadline; an instance that cannot tell where it stands is
replaced by a new one, whose InitProducerId fences it and aborts whatever it left open.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.records import Record, build_batch

from ..txn import RawTxn

T = TypeVar("T")
DEADLINE_S = 30.0  # for one step (a write, a commit, an InitProducerId) to get a definite answer
BACKOFF_S = 0.1
PACE_S = 0.5  # between cycles: a handful of requests a second, next to the workload's hundreds
PARTITIONS = 3  # see the module docstring for what each is for
# answers after which the same request may succeed once the cluster has moved on
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
})


class Link(RawTxn):
    """RawTxn to any host (the brokers listen on their namespace's address, not loopback)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.corr = 0


class Router:
    """Connections per broker, partition leaders and the transaction coordinator, found again
    whenever an answer or a dead connection says they moved."""

    def __init__(self, bootstrap: str, topic: str, tid: str) -> None:
        self.topic, self.tid = topic, tid
        self.addresses: dict[int, tuple[str, int]] = {}
        self.seeds = [(h, int(p)) for h, _, p in (a.rpartition(":") for a in bootstrap.split(","))]
        self.links: dict[int, Link] = {}
        self.leaders: dict[int, int] = {}
        self.coordinator = -1

    def close(self) -> None:
        for node in list(self.links):
            self.drop(node)

    def drop(self, node: int) -> None:
        link = self.links.pop(node, None)
        if link is not None:
            link.close()

    def link(self, node: int) -> Link:
        if node not in self.links:
            host, port = self.addresses[node]
            self.links[node] = Link(host, port)
        return self.links[node]

    def ask(self, node: int, request: Callable[[Link], T]) -> T | None:
        """`request` on `node`'s connection; None (connection dropped) when it failed on the way."""
        try:
            return request(self.link(node))
        except (OSError, AssertionError, KeyError):
            self.drop(node)
            return None

    def any_node(self, request: Callable[[Link], T]) -> T | None:
        """`request` on the first broker that answers: known ones first, then the bootstrap list."""
        for node in list(self.addresses):
            out = self.ask(node, request)
            if out is not None:
                return out
        for host, port in self.seeds:
            try:
                link = Link(host, port)
            except OSError:
                continue
            try:
                return request(link)
            except (OSError, AssertionError):
                continue
            finally:
                link.close()
        return None

    def refresh(self) -> None:
        def metadata(link: Link) -> MetadataResponse:
            resp = link.request(MetadataRequest(topics=[MetadataRequestTopic(name=self.topic)],
                                                allow_auto_topic_creation=False), 12)
            assert isinstance(resp, MetadataResponse)
            return resp

        def coordinator(link: Link) -> FindCoordinatorResponse:
            resp = link.request(FindCoordinatorRequest(key=self.tid, key_type=1), 3)
            assert isinstance(resp, FindCoordinatorResponse)
            return resp

        meta = self.any_node(metadata)
        if meta is not None:
            self.addresses.update({b.node_id: (b.host, b.port) for b in meta.brokers})
            for t in meta.topics:
                if t.name == self.topic:
                    self.leaders = {p.partition_index: p.leader_id for p in t.partitions if p.error_code == 0}
        found = self.any_node(coordinator)
        self.coordinator = found.node_id if found is not None and found.error_code == 0 else -1


def error_name(code: int | None) -> str:
    """What the history records of an answer: Kafka's error name, NONE, or io for no answer."""
    if code is None:
        return "io"
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Zombie:
    """The loop in the module docstring, run by a workload thread (``run`` until ``halted()``)."""

    def __init__(self, bootstrap: str, topic: str, tid: str, txn_timeout_ms: int, write: Callable[[dict[str, Any]], None],
                 note: Callable[[str, str], None], halted: Callable[[], bool], pause: Callable[[float], object]) -> None:
        self.topic, self.tid, self.txn_timeout_ms = topic, tid, txn_timeout_ms
        self.write, self.note, self.halted, self.pause = write, note, halted, pause
        self.router = Router(bootstrap, topic, tid)
        self.inc = 0  # instance number
        self.pid = self.epoch = -1
        self.seqs: dict[int, int] = {}  # partition -> next sequence of this instance's epoch
        self.cycle = 0
        self.fences = 0

    # ------------------------------------------------------------------------------------ requests

    def _until(self, step: str, attempt: Callable[[], int | None]) -> int | None:
        """Repeat `attempt` (an error code, None for no answer) while it is retriable, up to the
        deadline; the last answer (None: none definite)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            code = attempt()
            if code != ErrorCode.NONE:
                self.note(step, error_name(code))
            if code is not None and code not in RETRIABLE:
                return code
            if time.monotonic() > deadline:
                return None
            self.pause(BACKOFF_S)
            self.router.refresh()

    def _to_coordinator(self, request: Callable[[Link], int]) -> int | None:
        if self.router.coordinator < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.router.ask(self.router.coordinator, request)

    def init(self) -> bool:
        """A new instance: InitProducerId for the transactional id (fences the one before)."""
        got: list[tuple[int, int]] = []

        def request(link: Link) -> int:
            resp = link.request(InitProducerIdRequest(transactional_id=self.tid,
                                                      transaction_timeout_ms=self.txn_timeout_ms), 4)
            assert isinstance(resp, InitProducerIdResponse)
            if resp.error_code == 0:
                got.append((resp.producer_id, resp.producer_epoch))
            return resp.error_code

        code = self._until("init", lambda: self._to_coordinator(request))
        if code != ErrorCode.NONE or not got:
            return False
        self.inc += 1
        self.pid, self.epoch = got[-1]
        self.seqs = {}
        return True

    def _batch(self, partition: int, value: str, seq: int, epoch: int) -> bytes:
        return build_batch([Record(0, 0, None, value.encode())], producer_id=self.pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=True)

    def produce(self, partition: int, value: str, *, retry: bool = True,
                epoch: int | None = None) -> tuple[int | None, int | None]:
        """Produce one value to `partition`'s leader: (error code or None, offset)."""
        seq = self.seqs.get(partition, 0)
        batch = self._batch(partition, value, seq, self.epoch if epoch is None else epoch)
        offsets: list[int] = []

        def request(link: Link) -> int:
            code, offset = link.produce(self.topic, partition, batch, self.tid)
            offsets.append(offset)
            return code

        def attempt() -> int | None:
            node = self.router.leaders.get(partition, -1)
            return ErrorCode.LEADER_NOT_AVAILABLE if node < 0 else self.router.ask(node, request)

        code = self._until("produce", attempt) if retry else attempt()
        if code == ErrorCode.NONE:
            self.seqs[partition] = seq + 1
        return code, (offsets[-1] if code == ErrorCode.NONE else None)

    def add(self, partitions: list[int]) -> bool:
        def request(link: Link) -> int:
            codes = link.add_partitions(self.tid, self.pid, self.epoch, {self.topic: partitions})
            return next((c for c in codes.values() if c), ErrorCode.NONE if codes else ErrorCode.UNKNOWN_SERVER_ERROR)

        return self._until("add", lambda: self._to_coordinator(request)) == ErrorCode.NONE

    def end(self, commit: bool, *, epoch: int | None = None, retry: bool = True) -> int | None:
        def request(link: Link) -> int:
            return link.end(self.tid, self.pid, self.epoch if epoch is None else epoch, commit).error_code

        return self._until("end", lambda: self._to_coordinator(request)) if retry else self._to_coordinator(request)

    # ---------------------------------------------------------------------------------------- loop

    def run(self) -> None:
        self.router.refresh()
        try:
            while True:
                if self.pid < 0 and not self.init():
                    if self.halted():
                        return
                    self.pause(PACE_S)
                    continue
                self.cycle += 1
                if not self.committed_txn():
                    self.pid = -1  # a new instance aborts whatever this one left open
                    self.pause(PACE_S)
                    continue
                if self.halted():
                    return  # the last instance ends with no transaction open
                self.pause(PACE_S)
                if not self.zombie_cycle():
                    self.pid = -1
        finally:
            self.router.close()

    def _txn_line(self, seq: int, sends: list[dict[str, Any]], outcome: str, t0: float, tc: float | None) -> None:
        self.write({"f": "txn", "proc": "zombie", "inc": self.inc, "seq": seq, "topic": self.topic,
                    "sends": sends, "outcome": outcome, "t0": t0, "tc": tc, "t1": time.monotonic()})

    def committed_txn(self) -> bool:
        """Step 1: a transaction over every partition, writing to 0 and 1, committed (its marker
        goes to 2 as well). False: the instance is lost."""
        t0 = time.monotonic()
        if not self.add(list(range(PARTITIONS))):
            return False
        sends = []
        for p in (0, 1):
            value = f"z-{self.cycle}-{p}"
            code, offset = self.produce(p, value)
            sends.append({"partition": p, "value": value, "offset": offset})
            if code != ErrorCode.NONE:
                self._txn_line(2 * self.cycle, sends, "abort", t0, None)  # never committed: the next instance aborts it
                return False
        tc = time.monotonic()
        code = self.end(True)
        self._txn_line(2 * self.cycle, sends, "commit" if code == ErrorCode.NONE else "info", t0, tc)
        return code == ErrorCode.NONE

    def zombie_cycle(self) -> bool:
        """Steps 2-4: open a transaction, be fenced, write and commit anyway. True when the
        successor is ready to carry on."""
        t0 = time.monotonic()
        if not self.add([0, 2]):
            return False
        value = f"z-{self.cycle}-open"
        code, offset = self.produce(0, value)
        self._txn_line(2 * self.cycle + 1, [{"partition": 0, "value": value, "offset": offset}], "abort", t0, None)
        if code != ErrorCode.NONE:
            return False
        old_pid, old_epoch, old_seqs = self.pid, self.epoch, dict(self.seqs)
        if not self.init():
            return False
        fenced_at = time.monotonic()
        new_pid, new_epoch, new_seqs = self.pid, self.epoch, self.seqs
        if new_pid != old_pid:
            return True  # epochs exhausted, a new producer id: nothing to fence at the leaders
        self.seqs = old_seqs
        writes = []
        for p in range(PARTITIONS):
            value = f"z-{self.cycle}-zombie-{p}"
            t = time.monotonic()
            code, offset = self.produce(p, value, retry=False, epoch=old_epoch)
            writes.append({"partition": p, "value": value, "t0": t, "error": error_name(code), "offset": offset})
        commit = self.end(True, epoch=old_epoch, retry=False)
        self.seqs = new_seqs
        self.fences += 1
        self.write({"f": "fence", "proc": "zombie", "topic": self.topic, "tid": self.tid, "pid": old_pid,
                    "epoch": old_epoch, "by": new_epoch, "t": fenced_at, "writes": writes,
                    "commit": None if commit is None else error_name(commit)})
        return True
