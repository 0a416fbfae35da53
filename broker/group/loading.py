"""Loading a `__consumer_offsets` partition: replaying its records (transactional offsets wait
for their markers) and turning them into live groups when the partition's log is read."""

from __future__ import annotations

from collections.abc import Iterable

from . import records as rec
from .core import (
    STABLE,
    E,
    GroupCore,
)
from .loading_state import Loading
from .model import (
    Group,
    JoinResult,
    Member,
    OffsetEntry,
    SyncResult,
    TopicPartition,
)


class PartitionLoading(GroupCore):
    """Ownership of `__consumer_offsets` partitions and replaying them."""

    def own_partitions(self, partitions: Iterable[int], now: int) -> None:
        """Take over partitions that have nothing to load (the topic was just created)."""
        for p in partitions:
            self.owned.add(p)
        self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms, earlier_only=True)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads this partition now: its groups are forgotten here, and members
        parked in a join or sync are told NOT_COORDINATOR so they find the new coordinator."""
        self.owned.discard(partition)
        self.loading.pop(partition, None)
        for gid in [gid for gid, g in self.groups.items() if g.partition == partition]:
            g = self.groups.pop(gid)
            for m in g.members.values():
                if m.join_token is not None:
                    self._reply(m.join_token, JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                if m.sync_token is not None:
                    self._reply(m.sync_token, SyncResult(E.NOT_COORDINATOR))

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """Start reading the partition back for the election of `coordinator_epoch`; a load of an
        earlier election that is still reading is superseded (see `loads`)."""
        self.loading[partition] = Loading(coordinator_epoch)

    def loads(self, partition: int, coordinator_epoch: int) -> bool:
        """Is the load of `coordinator_epoch` still the partition's current one? A load whose
        leadership went, or was superseded by a newer election, must stop: what it read would
        otherwise merge into the new load, which it could even finish before that load's log is
        committed."""
        ld = self.loading.get(partition)
        return ld is not None and ld.coordinator_epoch == coordinator_epoch

    def load_record(self, partition: int, key: bytes | None, value: bytes | None, log_position: int,
                    producer_id: int = -1) -> None:
        """Replay one record; transactional ones (producer_id >= 0) wait for their marker.
        Raises records.RecordFormatError for bytes we cannot read."""
        ld = self.loading[partition]
        if key is None:
            raise rec.RecordFormatError("record without a key")
        k = rec.decode_key(key)
        if isinstance(k, rec.GroupKey):
            ld.groups[k.group] = None if value is None else rec.decode_group_value(value)
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
        ld = self.loading[partition]
        pending = ld.txn.pop(producer_id, {})
        if not commit:
            return
        for gid, offs in pending.items():
            dest = ld.offsets.setdefault(gid, {})
            for tp, e in offs.items():
                cur = dest.get(tp)
                if cur is None or cur.log_position < e.log_position:
                    dest[tp] = e

    def finish_loading(self, partition: int, now: int) -> None:
        """Turn what was read into live groups: with members they come back Stable and their
        members must heartbeat within a session timeout, as after a coordinator move in Kafka."""
        ld = self.loading.pop(partition)
        for gid in set(ld.groups) | set(ld.offsets):
            value = ld.groups.get(gid)
            offsets = {tp: e for tp, e in ld.offsets.get(gid, {}).items() if e is not None}
            if value is None and not offsets:
                continue
            g = Group(gid, partition, state_timestamp=now)
            g.offsets = offsets
            if value is not None:
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
                    g.state = STABLE
                    if g.leader not in g.members:
                        g.leader = next(iter(g.members))
                    for m in g.members.values():
                        self._heartbeat(g, m, now)
                    if len(g.members) > self.settings.max_group_size:
                        # the limit was lowered while the group was away: every member must rejoin,
                        # and those past the limit are turned away then (as Kafka does on load)
                        self._prepare_rebalance(g, now)
                self._snapshot_subscriptions(g)
            self.groups[gid] = g
        for pid, by_group in ld.txn.items():
            for gid, offs in by_group.items():
                tg = self.groups.get(gid)
                if tg is None:
                    tg = self.groups[gid] = Group(gid, partition, state_timestamp=now)
                tg.txn_pending.setdefault(pid, {}).update(offs)
                self._txn_groups.setdefault(pid, set()).add(gid)
        self.owned.add(partition)
        self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms, earlier_only=True)
