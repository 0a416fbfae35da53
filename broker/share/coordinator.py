"""The share coordinator: the durable state of share-partitions, kept in `__share_group_state`.

Kafka's share coordinator, reduced to what a share-partition leader needs. The state of
(group, topic id, partition) belongs to partition hash("group:topic id:partition") % N of
`__share_group_state`; the broker leading that partition serves it (ReadShareGroupState,
WriteShareGroupState, InitializeShareGroupState, DeleteShareGroupState: broker/apis/share_group_state.py).
Every write is one ShareSnapshot record holding the share-partition's whole state, appended and
answered once the in-sync replicas have it — so a write answered survives the loss of this broker.
When leadership of a partition comes here its records are read back (the last record of a key wins,
a tombstone removes) after everything the log held at the election is committed, as the group
coordinator loads `__consumer_offsets`; COORDINATOR_LOAD_IN_PROGRESS meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import structlog

from protocol.batch import CONTROL_FLAG
from protocol.clock import Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import coordinator_records as cr
from protocol.primitives import DecodeError
from protocol.records import Record, build_batch, decode_batches

from ..partition import AppendOrigin, Isolation, Partition
from ..partitioning import partition_for
from .manager import Key, StoredState
from .partition_state import StateRun

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..topics import TopicTable

log = structlog.get_logger()

STATE_TOPIC = "__share_group_state"
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
WRITE_TIMEOUT_S = 5.0
LOAD_READ_BYTES = 1 << 20


def coordinator_key(key: Key) -> str:
    """Kafka's SharePartitionKey as a string: what the state's partition is chosen by."""
    return f"{key[0]}:{key[1]}:{key[2]}"


def encode_key(key: Key) -> bytes:
    return cr.version_prefixed(cr.ShareSnapshotKey(group_id=key[0], topic_id=key[1], partition=key[2]),
                               cr.SHARE_SNAPSHOT_KEY_VERSION)


def encode_value(state: StoredState, leader_epoch: int, now_ms: int) -> bytes:
    return cr.version_prefixed(cr.ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=state.state_epoch, leader_epoch=leader_epoch, start_offset=state.start_offset,
        create_timestamp=now_ms, write_timestamp=now_ms,
        state_batches=[cr.ShareStateBatch(first_offset=r.first, last_offset=r.last, delivery_state=r.state,
                                          delivery_count=r.delivery_count) for r in state.runs]), 0)


def decode(key: bytes, value: bytes | None) -> tuple[Key, tuple[StoredState, int] | None]:
    """(the share-partition, (its state, the leader epoch that wrote it)) or None for a tombstone."""
    _, k = cr.read_version_prefixed(cr.ShareSnapshotKey, key)
    sk: Key = (k.group_id, k.topic_id, k.partition)
    if value is None:
        return sk, None
    _, v = cr.read_version_prefixed(cr.ShareSnapshotValue, value)
    runs = tuple(StateRun(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches)
    return sk, (StoredState(v.state_epoch, v.start_offset, runs), v.leader_epoch)


class ShareCoordinator:
    def __init__(self, cfg: BrokerConfig, topics: TopicTable, clock: Clock) -> None:
        self.cfg = cfg
        self.topics = topics
        self.clock = clock
        self.states: dict[Key, tuple[StoredState, int]] = {}  # state, leader epoch of its writer
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> the leader epoch whose load runs
        self._tasks: dict[asyncio.Task[None], None] = {}

    def start(self) -> None:
        topic = self.topics.get(STATE_TOPIC)
        if topic is not None:
            for p in topic.partitions:
                if p.is_leader:
                    self._begin_load(p)
        self.topics.listeners.append(self._on_partition)

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def num_partitions(self) -> int:
        topic = self.topics.get(STATE_TOPIC)
        return topic.num_partitions if topic is not None and topic.num_partitions else \
            self.cfg.share_coordinator_state_topic_num_partitions

    def partition_for(self, key: Key) -> int:
        return partition_for(coordinator_key(key), self.num_partitions())

    async def ensure_topic(self) -> None:
        await self.topics.ensure_internal(STATE_TOPIC, self.cfg.share_coordinator_state_topic_num_partitions,
                                          self.cfg.share_coordinator_state_topic_replication_factor,
                                          STATE_TOPIC_CONFIGS)

    # ---- leadership and loading --------------------------------------------------------------
    def _on_partition(self, topic: str, partition: Partition, leads: bool) -> None:
        if topic != STATE_TOPIC:
            return
        i = partition.index
        if leads and self.loading.get(i) != partition.leader_epoch and i not in self.owned:
            self._begin_load(partition)
        elif not leads:
            self.owned.discard(i)
            self.loading.pop(i, None)
            n = self.num_partitions()
            for key in [k for k in self.states if partition_for(coordinator_key(k), n) == i]:
                del self.states[key]

    def _begin_load(self, p: Partition) -> None:
        self.loading[p.index] = p.leader_epoch
        task = asyncio.get_running_loop().create_task(self._load(p, p.leader_epoch))
        self._tasks[task] = None
        task.add_done_callback(lambda done: self._tasks.pop(done, None))

    async def _load(self, p: Partition, epoch: int) -> None:
        if not await p.caught_up_as_leader():
            return
        found: dict[Key, tuple[StoredState, int] | None] = {}
        pos = p.log_start_offset
        while self.loading.get(p.index) == epoch:
            r = p.read(pos, LOAD_READ_BYTES, Isolation.READ_UNCOMMITTED)
            if r.error or not r.records:
                break
            for h, recs in decode_batches(bytes(r.records)):
                if h.attributes & CONTROL_FLAG:
                    continue
                for rec in recs:
                    if rec.offset < pos or rec.key is None:
                        continue
                    try:
                        k, v = decode(rec.key, rec.value)
                    except (DecodeError, UnicodeDecodeError) as e:
                        log.warning("skipping unreadable record in " + STATE_TOPIC, offset=rec.offset, error=str(e))
                        continue
                    found[k] = v
            pos = r.next_offset
            await asyncio.sleep(0)
        if self.loading.get(p.index) != epoch:
            return
        for k, v in found.items():
            if v is None:
                self.states.pop(k, None)
            else:
                self.states[k] = v
        del self.loading[p.index]
        self.owned.add(p.index)
        log.info("share-group state loaded", partition=p.index, share_partitions=sum(v is not None for v in found.values()))

    # ---- the APIs ----------------------------------------------------------------------------
    def error_for(self, key: Key) -> ErrorCode:
        i = self.partition_for(key)
        if i in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if i not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, StoredState | None]:
        err = self.error_for(key)
        if err:
            return err, None
        found = self.states.get(key)
        if found is not None and leader_epoch >= 0 and found[1] > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None  # a deposed share-partition leader
        return ErrorCode.NONE, None if found is None else found[0]

    async def write(self, key: Key, leader_epoch: int, state: StoredState | None) -> ErrorCode:
        """Append the share-partition's state (None: delete it) and answer once it is replicated."""
        err = self.error_for(key)
        if err:
            return err
        found = self.states.get(key)
        if found is not None and leader_epoch >= 0 and found[1] > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        p = self.topics.partition(STATE_TOPIC, self.partition_for(key))
        if p is None:
            return ErrorCode.NOT_COORDINATOR
        value = None if state is None else encode_value(state, leader_epoch, self.clock.now_ms())
        try:
            res = p.append(build_batch([Record(0, 0, encode_key(key), value)]), AppendOrigin.COORDINATOR)
        except KafkaError as e:
            return ErrorCode.NOT_COORDINATOR if e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER else e.code
        if state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = (state, leader_epoch)
        if p.flush_wait is not None:
            await p.flush_wait
        code = await p.replicated(res.last_offset + 1, WRITE_TIMEOUT_S)
        return ErrorCode.NOT_COORDINATOR if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else code
