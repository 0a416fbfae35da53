"""Committed offsets: OffsetCommit, TxnOffsetCommit (pending until the transaction's marker),
OffsetFetch, retention, OffsetDelete, and DeleteGroups (an Empty group is only its offsets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from . import records as rec
from .core import DEAD, EMPTY, E, GroupTable
from .model import CommitPlan, FetchedOffset, Group, Now, OffsetCommitIn, OffsetEntry, TopicPartition, Write
from .subscriptions import CONSUMER_PROTOCOL_TYPE

NO_OFFSET = -1
OFFSET_COMMIT_LATEST = 9  # the newest OffsetCommit version served: the one that carries a member epoch


class MemberChecks(Protocol):
    """What offsets need of membership: may this member commit (membership.Membership)."""

    def commit_error(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                     now: Now, api_version: int) -> int: ...

    def txn_commit_error(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation: int) -> int: ...

    def fetch_error(self, g: Group, member_id: str | None, member_epoch: int) -> int: ...

    def tombstones(self, g: Group) -> list[rec.Key]: ...


class Offsets:
    """What is committed, pending in a transaction, fetched, expired and deleted."""

    def __init__(self, table: GroupTable, members: MemberChecks, partition_exists: Callable[[str, int], bool]) -> None:
        self.t = table
        self._members = members
        self._partition_exists = partition_exists
        self._txn_groups: dict[int, set[str]] = {}  # producer id -> groups with its pending offsets

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, OffsetCommitIn], now: Now,
                       retention_ms: int = -1, api_version: int = OFFSET_COMMIT_LATEST) -> CommitPlan:
        """Check an OffsetCommit (of `api_version`); apply the returned plan with offsets_written
        after its records are in the log (partitions with an error are in plan.errors and never stored)."""
        plan = CommitPlan(group_id, self.t.partition_for(group_id), {}, {}, [])
        err = self._members.commit_error(group_id, member_id, group_instance_id, generation, now, api_version)
        if err:
            plan.errors = dict.fromkeys(offsets, err)
            return plan
        self._stage(plan, offsets, now, retention_ms)
        return plan

    def _stage(self, plan: CommitPlan, offsets: dict[TopicPartition, OffsetCommitIn], now: Now,
               retention_ms: int) -> None:
        for tp, o in offsets.items():
            if not self._partition_exists(*tp):
                plan.errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata = o.metadata or ""
            if len(metadata) > self.t.settings.offset_metadata_max_bytes:
                plan.errors[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            commit_ts = now.wall if o.commit_timestamp < 0 else o.commit_timestamp
            value = rec.OffsetValue(o.offset, o.leader_epoch, metadata, commit_ts,
                                    commit_ts + retention_ms if retention_ms >= 0 else -1)
            plan.errors[tp] = 0
            plan.staged[tp] = OffsetEntry(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                          value.expire_timestamp)
            plan.writes.append(Write(plan.partition, rec.encode_key(rec.OffsetKey(plan.group_id, *tp)),
                                     rec.encode_offset_value(value)))

    def offsets_written(self, plan: CommitPlan, first_log_position: int) -> None:
        """The plan's records are in the log from `first_log_position` on (one per staged offset,
        in order): make the offsets visible (or, for a transaction, pending on its marker)."""
        g = self.t.groups.get(plan.group_id)
        if g is None:
            stamp = max((e.commit_timestamp for e in plan.staged.values()), default=-1)
            g = self.t.groups[plan.group_id] = Group(plan.group_id, plan.partition, state_timestamp=stamp)
        for i, (tp, entry) in enumerate(plan.staged.items()):
            entry.log_position = first_log_position + i
            if plan.producer_id >= 0:
                g.txn_pending.setdefault(plan.producer_id, {})[tp] = entry
                self._txn_groups.setdefault(plan.producer_id, set()).add(g.group_id)
            else:
                g.offsets[tp] = entry

    def txn_offsets_failed(self, plan: CommitPlan) -> None:
        """A transaction's offsets that did not reach the in-sync replicas: no longer pending (the
        client was told the commit failed and must abort), unless its marker already took them."""
        g = self.t.groups.get(plan.group_id)
        pending = g.txn_pending.get(plan.producer_id) if g is not None else None
        if g is None or pending is None:
            return
        for tp, entry in plan.staged.items():
            if pending.get(tp) is entry:
                del pending[tp]
        if not pending:
            del g.txn_pending[plan.producer_id]
            self._unindex(plan.producer_id, g.group_id)

    def _unindex(self, producer_id: int, group_id: str) -> None:
        groups = self._txn_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._txn_groups[producer_id]

    def prepare_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                            offsets: dict[TopicPartition, OffsetCommitIn], now: Now, *, member_id: str = "",
                            group_instance_id: str | None = None, generation: int = -1) -> CommitPlan:
        """TxnOffsetCommit: like a commit, but the offsets stay invisible (and make OffsetFetch
        with require_stable answer UNSTABLE_OFFSET_COMMIT) until complete_txn. The member checks
        are the loose ones Kafka applies to transactional commits (KIP-447)."""
        plan = CommitPlan(group_id, self.t.partition_for(group_id), {}, {}, [], producer_id, producer_epoch)
        err = self._members.txn_commit_error(group_id, member_id, group_instance_id, generation)
        if err:
            plan.errors = dict.fromkeys(offsets, err)
            return plan
        self._stage(plan, offsets, now, -1)
        return plan

    def complete_txn(self, producer_id: int, commit: bool, partition: int) -> None:
        """The transaction's marker is in `__consumer_offsets` partition `partition`: the offsets
        it holds for groups of that partition become the committed ones (unless a later plain
        commit already overtook them) or are dropped. Groups on other partitions wait for their
        own marker — a transaction spanning groups on several partitions completes partition by
        partition, as the markers land."""
        groups = self._txn_groups.get(producer_id)
        if not groups:
            return
        for gid in [gid for gid in groups if (g := self.t.groups.get(gid)) is None or g.partition == partition]:
            groups.discard(gid)
            g = self.t.groups.get(gid)
            if g is None:
                continue
            pending = g.txn_pending.pop(producer_id, {})
            if not commit:
                continue
            for tp, e in pending.items():
                cur = g.offsets.get(tp)
                if cur is None or cur.log_position < e.log_position:
                    g.offsets[tp] = e
        if not groups:
            del self._txn_groups[producer_id]

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[int, list[FetchedOffset]]:
        """(group error, offsets). partitions None = every partition the group has an offset for.
        A member of a consumer group (OffsetFetch v9) must give its current member epoch."""
        err = self.t.coordinator_error(group_id)
        if err:
            return err, []
        g = self.t.groups.get(group_id)
        if g is None or g.state is DEAD:
            return 0, [FetchedOffset(t, p, NO_OFFSET, -1, "", 0) for t, p in partitions or []]
        err = self._members.fetch_error(g, member_id, member_epoch)
        if err:
            return err, []
        if partitions is None:
            partitions = sorted(g.offsets)
        out = []
        for tp in partitions:
            if require_stable and g.has_pending_txn(tp):
                out.append(FetchedOffset(tp[0], tp[1], NO_OFFSET, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                continue
            e = g.offsets.get(tp)
            if e is None:
                out.append(FetchedOffset(tp[0], tp[1], NO_OFFSET, -1, "", 0))
            else:
                out.append(FetchedOffset(tp[0], tp[1], e.offset, e.leader_epoch, e.metadata, 0))
        return 0, out

    def expire_offsets(self, now: Now) -> int:
        """Tombstone offsets past retention; an Empty group left without offsets is deleted.
        Empty groups count from the moment they became Empty, groups that only store offsets
        from each commit; groups with members keep theirs. Returns the number of offsets expired."""
        retention = self.t.settings.offsets_retention_ms
        expired_total = 0
        for g in list(self.t.groups.values()):
            if g.partition not in self.t.owned or g.state is not EMPTY:
                continue
            # past an explicit expire timestamp (OffsetCommit v1 with a retention), or past retention
            expired = [tp for tp, e in g.offsets.items() if not g.has_pending_txn(tp) and (
                now.wall >= e.expire_timestamp if e.expire_timestamp >= 0
                else now.wall - (g.state_timestamp if g.protocol_type else e.commit_timestamp) >= retention)]
            for tp in expired:
                del g.offsets[tp]
                self.t.write(g.partition, rec.OffsetKey(g.group_id, *tp), None)
            expired_total += len(expired)
            if not g.offsets and not g.txn_pending and not g.members and not g.pending_members:
                self._delete_group(g, now)
        return expired_total

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """(group error, error per partition). Kafka's rules (KIP-496): a group with members that is
        not of the consumer protocol refuses as a whole (NON_EMPTY_GROUP); a consumer group with
        members keeps the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); every
        other offset is tombstoned, committed or still pending in a transaction, so that it stays
        gone after a restart. A group left Empty without offsets goes at the next retention check,
        as in Kafka 4 (whose coordinator deletes such groups in the same periodic cleanup)."""
        err = self.t.coordinator_error(group_id) if group_id else E.INVALID_GROUP_ID
        if err:
            return err, {}
        g = self.t.groups.get(group_id)
        if g is None or g.state is DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        if g.state is not EMPTY and g.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return E.NON_EMPTY_GROUP, {}
        out: dict[TopicPartition, int] = {}
        for tp in partitions:
            if not self._partition_exists(*tp):
                out[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif g.state is not EMPTY and g.subscribes_to(tp[0]):
                out[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                out[tp] = 0
                had = g.offsets.pop(tp, None) is not None
                for pending in g.txn_pending.values():
                    had = pending.pop(tp, None) is not None or had
                if had:
                    self.t.write(g.partition, rec.OffsetKey(group_id, *tp), None)
        return 0, out

    def delete_groups(self, group_ids: list[str], now: Now) -> dict[str, int]:
        """DeleteGroups: only an Empty group goes, with its offsets (tombstoned)."""
        out: dict[str, int] = {}
        for gid in group_ids:
            if gid in out:
                continue
            err = self.t.coordinator_error(gid)
            g = self.t.groups.get(gid)
            if err or g is None or g.state is DEAD:
                out[gid] = err or E.GROUP_ID_NOT_FOUND
            elif g.state is not EMPTY:
                out[gid] = E.NON_EMPTY_GROUP
            else:
                for tp in g.offsets:
                    self.t.write(g.partition, rec.OffsetKey(gid, *tp), None)
                g.offsets.clear()
                self._delete_group(g, now)
                out[gid] = 0
        return out

    def _delete_group(self, g: Group, now: Now) -> None:
        g.transition(DEAD, now)
        for pid in g.txn_pending:
            self._unindex(pid, g.group_id)
        g.txn_pending.clear()
        for key in self._members.tombstones(g):
            self.t.write(g.partition, key, None)
        del self.t.groups[g.group_id]

    def restore_pending(self, g: Group, producer_id: int, offsets: dict[TopicPartition, OffsetEntry]) -> None:
        """Offsets read back from the log whose transaction's marker is not there yet."""
        g.txn_pending.setdefault(producer_id, {}).update(offsets)
        self._txn_groups.setdefault(producer_id, set()).add(g.group_id)
