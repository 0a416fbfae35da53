"""The group coordinator as a state machine: events in (with the time), results and effects out.

No asyncio, no sockets, no files: the asyncio wrapper (coordinator.py) parks requests under
integer tokens, writes the records this machine asks for, and calls `tick` when `next_deadline`
comes. Everything here is therefore deterministic and testable without a broker.

The rules are Kafka's classic group protocol (see docs/groups.md for the walk-through):

* Empty -> PreparingRebalance when the first member joins (after the initial rebalance delay,
  extended while new members keep arriving), or from Stable/CompletingRebalance when membership
  or a member's protocols change.
* PreparingRebalance -> CompletingRebalance when every known member has rejoined (or the
  rebalance timeout passed: dynamic members that did not rejoin are dropped). The generation
  goes up, a protocol is voted, the leader receives every member's metadata.
* CompletingRebalance -> Stable when the leader's SyncGroup assignment is stored; members that
  never send SyncGroup within the rebalance timeout are dropped and the group rebalances again.
* Any member that stops heartbeating for its session timeout is dropped.

KIP-848 consumer groups (ConsumerGroupHeartbeat) are consumer.py's, over the same table: a group is
one or the other (Group.consumer), and an empty one turns into the other kind when a member of the
other protocol joins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from . import records as rec
from .assignors import TopicMeta
from .consumer import TIMER_KINDS, ConsumerGroups, ConsumerGroupSummary, ConsumerHeartbeat, HeartbeatResult
from .core import DEAD, EXPIRE, STABLE, E, GroupTable, Settings
from .loading import PartitionLoading
from .membership import Membership
from .migration import Migration
from .model import Group, GroupSummary, JoinRequest, JoinResult, MemberSummary, Now, SyncRequest
from .offsets import Offsets
from .share import SESSION as SHARE_SESSION
from .share import ShareGroups, ShareGroupSummary, ShareHeartbeat

__all__ = ["GROUP_OPERATIONS", "GroupStateMachine", "Settings"]
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE: all of them, no ACLs yet


class GroupStateMachine:
    """The three parts over one table of groups, with the timers' dispatch and the admin reads.
    Each event is the method of the part it concerns, named here too so that the shell and the
    tests drive one object."""

    def __init__(self, settings: Settings, partition_exists: Callable[[str, int], bool],
                 new_member_id: Callable[[str], str] | None = None,
                 lease_held: Callable[[], bool] = lambda: True,
                 topics: Callable[[], Mapping[str, TopicMeta]] = dict,
                 opening: Callable[[int], bool] = lambda i: False) -> None:
        self.table = t = GroupTable(settings, lease_held, opening)
        self.membership = m = Membership(t, new_member_id)
        self.consumer = c = ConsumerGroups(t, topics, None if new_member_id is None else lambda: new_member_id(""))
        self.migration = c.migration = Migration(c, m)
        self.share = sh = ShareGroups(t, topics, None if new_member_id is None else lambda: new_member_id(""))
        checks = _MemberChecks(t, m, c, sh)
        self.offsets = o = Offsets(t, checks, partition_exists)
        self.loader = ld = PartitionLoading(t, m, o, c, sh, topics)
        self.groups, self.owned, self.loading = t.groups, t.owned, t.loading  # the table's, for reading
        self.partition_for, self.coordinator_error, self.drain = t.partition_for, t.coordinator_error, t.drain
        self.next_deadline = t.timers.next_deadline
        self.commit_offsets, self.prepare_txn_offsets, self.offsets_written, self.txn_offsets_failed = (
            o.commit_offsets, o.prepare_txn_offsets, o.offsets_written, o.txn_offsets_failed)
        self.complete_txn, self.fetch_offsets, self.expire_offsets = o.complete_txn, o.fetch_offsets, o.expire_offsets
        self.delete_offsets, self.delete_groups = o.delete_offsets, o.delete_groups
        self.own_partitions, self.unload_partition, self.begin_loading, self.loads = (
            ld.own_partitions, ld.unload_partition, ld.begin_loading, ld.loads)
        self.load_record, self.load_marker, self.finish_loading = ld.load_record, ld.load_marker, ld.finish_loading

    def join_group(self, token: int, req: JoinRequest, now: Now) -> None:
        """A classic JoinGroup; an empty consumer group becomes classic for it first, one with
        members takes it as a classic member (migration.py)."""
        g = self.table.groups.get(req.group_id)
        if g is not None and g.share is not None:
            self.table.reply(token, JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))
            return
        if not self.consumer.yield_to_classic(req.group_id, now):
            self.migration.join(token, req, now)
            return
        self.membership.join_group(token, req, now)

    def _classic_in_consumer(self, group_id: str) -> bool:
        g = self.table.groups.get(group_id)
        return g is not None and g.consumer is not None and not self.table.coordinator_error(group_id)

    def sync_group(self, token: int, req: SyncRequest, now: Now) -> None:
        if self._classic_in_consumer(req.group_id):
            self.migration.sync(token, req, now)
        else:
            self.membership.sync_group(token, req, now)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                  now: Now) -> int:
        if self._classic_in_consumer(group_id):
            return self.migration.heartbeat(group_id, member_id, group_instance_id, generation, now)
        return self.membership.heartbeat(group_id, member_id, group_instance_id, generation, now)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]], now: Now) -> tuple[int, list[int]]:
        if self._classic_in_consumer(group_id):
            return self.migration.leave(group_id, leaving, now)
        return self.membership.leave_group(group_id, leaving, now)

    def consumer_heartbeat(self, req: ConsumerHeartbeat, now: Now) -> HeartbeatResult:
        g = self.table.groups.get(req.group_id)
        if g is not None and g.share is not None and not self.table.coordinator_error(req.group_id):
            return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        return self.consumer.heartbeat(req, now)

    def share_heartbeat(self, req: ShareHeartbeat, now: Now) -> HeartbeatResult:
        return self.share.heartbeat(req, now)

    def describe_share_group(self, group_id: str) -> tuple[int, ShareGroupSummary | None]:
        return self.share.describe(group_id)

    def describe_consumer_group(self, group_id: str) -> tuple[int, ConsumerGroupSummary | None]:
        return self.consumer.describe(group_id)

    @property
    def active(self) -> bool:
        """False once the broker stops: every group answers COORDINATOR_NOT_AVAILABLE."""
        return self.table.active

    @active.setter
    def active(self, active: bool) -> None:
        self.table.active = active

    def tick(self, now: Now) -> None:
        """Fire every timer due by `now` on the monotonic clock."""
        for key in self.table.timers.pop_due(now.mono):
            if key == EXPIRE:
                self.offsets.expire_offsets(now)
                self.table.check_retention(now)
            elif key[0] in TIMER_KINDS:
                self.consumer.on_timer(key, now)
            elif key[0] == SHARE_SESSION:
                self.share.on_timer(key, now)
            else:
                self.membership.on_timer(key, now)

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        dead = GroupSummary(group_id, DEAD.value, "", "", ())
        err = self.table.coordinator_error(group_id)
        if err:
            return err, dead
        g = self.table.groups.get(group_id)
        if g is None:
            return 0, dead
        if g.consumer is not None or g.share is not None:  # Kafka 4: DescribeGroups is for classic groups
            return E.GROUP_ID_NOT_FOUND, GroupSummary(group_id, DEAD.value, "", "", ())
        stable = g.state is STABLE
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(g.protocol_name) if stable else b"", m.assignment if stable else b"")
            for m in g.members.values())
        return 0, GroupSummary(g.group_id, g.state.value, g.protocol_type or "",
                               (g.protocol_name or "") if stable else "", members)

    def list_groups(self, states: list[str] | None = None,
                    types: list[str] | None = None) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]): group type "classic", "consumer" or "share"."""
        err = 0 if self.table.active else E.COORDINATOR_NOT_AVAILABLE
        if self.table.loading:
            err = E.COORDINATOR_LOAD_IN_PROGRESS
        want_states = {s.lower() for s in states or []}
        want_types = {t.lower() for t in types or []}
        out = []
        for g in self.table.groups.values():
            if g.state is DEAD or g.partition not in self.table.owned:
                continue
            kind, state = (("consumer", g.consumer.state()) if g.consumer is not None else
                           ("share", g.share.state()) if g.share is not None else ("classic", g.state.value))
            if (want_states and state.lower() not in want_states) or (want_types and kind not in want_types):
                continue
            out.append((g.group_id, g.protocol_type or "", state, kind))
        return err, out


class _MemberChecks:
    """The member checks of offset commits and fetches, by the kind of the group (offsets.MemberChecks)."""

    def __init__(self, table: GroupTable, classic: Membership, consumer: ConsumerGroups, share: ShareGroups) -> None:
        self.t, self._classic, self._consumer, self._share = table, classic, consumer, share

    def _consumer_group(self, group_id: str) -> Group | None:
        g = self.t.groups.get(group_id)
        return g if g is not None and g.consumer is not None and not self.t.coordinator_error(group_id) else None

    def commit_error(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                     now: Now, api_version: int) -> int:
        g = self._consumer_group(group_id)
        if g is not None:
            return self._consumer.commit_error(g, member_id, generation, transactional=False,
                                               api_version=api_version)
        return self._classic.commit_error(group_id, member_id, group_instance_id, generation, now)

    def txn_commit_error(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> int:
        g = self._consumer_group(group_id)
        if g is not None:
            return self._consumer.commit_error(g, member_id, generation, transactional=True)
        return self._classic.txn_commit_error(group_id, member_id, group_instance_id, generation)

    def fetch_error(self, g: Group, member_id: str | None, member_epoch: int) -> int:
        return self._consumer.fetch_error(g, member_id, member_epoch) if g.consumer is not None else 0

    def tombstones(self, g: Group) -> list[rec.Key]:
        return self._share.tombstones(g) if g.share is not None else self._consumer.tombstones(g)
