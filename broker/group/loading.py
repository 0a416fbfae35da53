"""Loading a `__consumer_offsets` partition: replaying its records (transactional offsets wait
for their markers) and turning them into live groups when the partition's log is read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, Protocol

from protocol.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG
from protocol.control import parse_control_record
from protocol.records import decode_batches
from storage.faults import broken

from . import records as rec
from . import share as share_records
from .assignors import TopicMeta
from .consumer_loading import ConsumerLoad, build
from .consumer_loading import load_record as load_consumer_record
from .core import GroupTable
from .model import Group, Loading, Member, Now, OffsetEntry, TopicPartition


class Entry(NamedTuple):
    """One record read back; `producer_id` >= 0 for a transaction's, which waits for its marker."""
    key: bytes | None
    value: bytes | None
    offset: int
    producer_id: int


class Marker(NamedTuple):
    producer_id: int
    commit: bool


Replayed = Entry | Marker


def replayed(records: bytes, start: int) -> list[Replayed]:
    """What a chunk of the log says, in log order, from offset `start` on. Pure and on a copy of
    the bytes, so the coordinator decodes it in a worker thread and applies it on the loop."""
    out: list[Replayed] = []
    for h, recs in decode_batches(records):
        if h.base_offset + h.last_offset_delta < start:
            continue
        if h.attributes & CONTROL_FLAG:
            for cr in recs:
                marker = parse_control_record(cr.key, cr.value)
                if marker.is_transaction_marker:
                    out.append(Marker(h.producer_id, marker.is_commit))
            continue
        pid = h.producer_id if h.attributes & TRANSACTIONAL_FLAG else -1
        out.extend(Entry(cr.key, cr.value, cr.offset, pid) for cr in recs if cr.offset >= start)
    return out


class Sessions(Protocol):
    """What loading needs of membership: the members of groups that arrive and leave with their
    partition (membership.Membership)."""

    def resume(self, g: Group, now: Now) -> None: ...

    def unloaded(self, g: Group) -> None: ...


class PendingOffsets(Protocol):
    """What loading needs of offsets: transactional offsets read back without their marker
    (offsets.Offsets)."""

    def restore_pending(self, g: Group, producer_id: int, offsets: dict[TopicPartition, OffsetEntry]) -> None: ...


class ConsumerSessions(Protocol):
    """What loading needs of the KIP-848 part: the members of consumer groups read back
    (consumer.ConsumerGroups)."""

    def resume(self, g: Group, now: Now) -> None: ...


class PartitionLoading:
    """Ownership of `__consumer_offsets` partitions and replaying them."""

    def __init__(self, table: GroupTable, sessions: Sessions, pending: PendingOffsets,
                 consumer_sessions: ConsumerSessions, share_sessions: ConsumerSessions,
                 topics: Callable[[], Mapping[str, TopicMeta]] = dict) -> None:
        self.t = table
        self._sessions = sessions
        self._pending = pending
        self._consumer_sessions = consumer_sessions
        self._share_sessions = share_sessions  # share.ShareGroups, whose resume is the same shape
        self._topics = topics
        self._consumer: dict[int, dict[str, ConsumerLoad]] = {}  # partition -> KIP-848 groups read so far
        self._share: dict[int, dict[str, share_records.ShareLoad]] = {}  # partition -> KIP-932 groups

    def own_partitions(self, partitions: Iterable[int], now: Now) -> None:
        """Take over partitions that have nothing to load (the topic was just created)."""
        self.t.owned.update(partitions)
        self.t.check_retention(now)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads this partition now: its groups are forgotten here, and members
        parked in a join or sync are told NOT_COORDINATOR so they find the new coordinator."""
        self.t.owned.discard(partition)
        self.t.loading.pop(partition, None)
        self._consumer.pop(partition, None)
        self._share.pop(partition, None)
        for gid in [gid for gid, g in self.t.groups.items() if g.partition == partition]:
            self._sessions.unloaded(self.t.groups.pop(gid))

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """Start reading the partition back for the election of `coordinator_epoch`; a load of an
        earlier election that is still reading is superseded (see `loads`)."""
        self.t.loading[partition] = Loading(coordinator_epoch)
        self._consumer[partition] = {}
        self._share[partition] = {}

    def loads(self, partition: int, coordinator_epoch: int) -> bool:
        """Is the load of `coordinator_epoch` still the partition's current one? A load whose
        leadership went, or was superseded by a newer election, must stop: what it read would
        otherwise merge into the new load, which it could even finish before that load's log is
        committed."""
        ld = self.t.loading.get(partition)
        return ld is not None and (ld.coordinator_epoch == coordinator_epoch or broken("group-load-epoch"))

    def load_record(self, partition: int, key: bytes | None, value: bytes | None, log_position: int,
                    producer_id: int = -1) -> None:
        """Replay one record; transactional ones (producer_id >= 0) wait for their marker.
        Raises records.RecordFormatError for bytes we cannot read."""
        ld = self.t.loading[partition]
        if key is None:
            raise rec.RecordFormatError("record without a key")
        k = rec.decode_key(key)
        if isinstance(k, rec.GroupKey):
            ld.groups[k.group] = None if value is None else rec.decode_group_value(value)
            return
        if isinstance(k, rec.ConsumerKey) and k.kind in rec.SHARE_KINDS:
            share_records.load_record(self._share.setdefault(partition, {}), k, value)
            return
        if isinstance(k, rec.ConsumerKey):
            load_consumer_record(self._consumer.setdefault(partition, {}), k, value)
            return
        tp = TopicPartition(k.topic, k.partition)
        entry = None
        if value is not None:
            v = rec.decode_offset_value(value)
            entry = OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                                log_position)
        if producer_id >= 0:
            if entry is not None:
                ld.txn.setdefault(producer_id, {}).setdefault(k.group, {})[tp] = entry
            return
        if entry is None:
            # a tombstone also cancels the partition's pending transactional offsets, as
            # delete_offsets did in memory: a later commit marker must not bring them back
            for by_group in ld.txn.values():
                by_group.get(k.group, {}).pop(tp, None)
        ld.offsets.setdefault(k.group, {})[tp] = entry

    def load_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        ld = self.t.loading[partition]
        pending = ld.txn.pop(producer_id, {})
        if not commit:
            return
        for gid, offs in pending.items():
            dest = ld.offsets.setdefault(gid, {})
            for tp, e in offs.items():
                cur = dest.get(tp)
                if cur is None or cur.log_position < e.log_position:
                    dest[tp] = e

    def finish_loading(self, partition: int, now: Now) -> None:
        """Turn what was read into live groups; those with members resume (Sessions.resume)."""
        ld = self.t.loading.pop(partition)
        consumer = {gid: cg for gid, cl in self._consumer.pop(partition, {}).items() if (cg := build(cl)) is not None}
        topics = self._topics()
        share = {gid: sg for gid, sl in self._share.pop(partition, {}).items()
                 if (sg := share_records.build(sl, topics)) is not None}
        for gid in set(ld.groups) | set(ld.offsets) | set(consumer) | set(share):
            value = ld.groups.get(gid)
            offsets = {tp: e for tp, e in ld.offsets.get(gid, {}).items() if e is not None}
            if value is None and not offsets and gid not in consumer and gid not in share:
                continue
            g = Group(gid, partition, state_timestamp=now.wall)
            g.offsets = offsets
            if gid in share:
                g.share = share[gid]
                self._share_sessions.resume(g, now)
            elif gid in consumer:
                g.consumer = consumer[gid]
                self._consumer_sessions.resume(g, now)
            elif value is not None:
                g.protocol_type = value.protocol_type or None
                g.generation = value.generation
                g.protocol_name = value.protocol_name
                g.leader = value.leader
                g.state_timestamp = value.state_timestamp
                for mv in value.members:
                    m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                               mv.rebalance_timeout_ms, mv.session_timeout_ms, value.protocol_type,
                               [(value.protocol_name or "", mv.subscription)], mv.assignment)
                    g.members[m.member_id] = m
                    if m.group_instance_id is not None:
                        g.static_members[m.group_instance_id] = m.member_id
                if g.members:
                    self._sessions.resume(g, now)
                g.snapshot_subscriptions()
            self.t.groups[gid] = g
        for pid, by_group in ld.txn.items():
            for gid, offs in by_group.items():
                tg = self.t.groups.get(gid)
                if tg is None:
                    tg = self.t.groups[gid] = Group(gid, partition, state_timestamp=now.wall)
                self._pending.restore_pending(tg, pid, offs)
        self.t.owned.add(partition)
        self.t.check_retention(now)
