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
"""

from __future__ import annotations

from collections.abc import Callable

from .core import DEAD, EXPIRE, STABLE, E, GroupTable, Settings
from .loading import PartitionLoading
from .membership import Membership
from .model import GroupSummary, MemberSummary, Now
from .offsets import Offsets

__all__ = ["GROUP_OPERATIONS", "GroupStateMachine", "Settings"]
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE: all of them, no ACLs yet


class GroupStateMachine:
    """The three parts over one table of groups, with the timers' dispatch and the admin reads.
    Each event is the method of the part it concerns, named here too so that the shell and the
    tests drive one object."""

    def __init__(self, settings: Settings, partition_exists: Callable[[str, int], bool],
                 new_member_id: Callable[[str], str] | None = None,
                 lease_held: Callable[[], bool] = lambda: True) -> None:
        self.table = t = GroupTable(settings, lease_held)
        self.membership = m = Membership(t, new_member_id)
        self.offsets = o = Offsets(t, m, partition_exists)
        self.loader = ld = PartitionLoading(t, m, o)
        self.groups, self.owned, self.loading = t.groups, t.owned, t.loading  # the table's, for reading
        self.partition_for, self.coordinator_error, self.drain = t.partition_for, t.coordinator_error, t.drain
        self.next_deadline = t.timers.next_deadline
        self.join_group, self.sync_group, self.heartbeat, self.leave_group = (
            m.join_group, m.sync_group, m.heartbeat, m.leave_group)
        self.commit_offsets, self.prepare_txn_offsets, self.offsets_written, self.txn_offsets_failed = (
            o.commit_offsets, o.prepare_txn_offsets, o.offsets_written, o.txn_offsets_failed)
        self.complete_txn, self.fetch_offsets, self.expire_offsets = o.complete_txn, o.fetch_offsets, o.expire_offsets
        self.delete_offsets, self.delete_groups = o.delete_offsets, o.delete_groups
        self.own_partitions, self.unload_partition, self.begin_loading, self.loads = (
            ld.own_partitions, ld.unload_partition, ld.begin_loading, ld.loads)
        self.load_record, self.load_marker, self.finish_loading = ld.load_record, ld.load_marker, ld.finish_loading

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
        stable = g.state is STABLE
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(g.protocol_name) if stable else b"", m.assignment if stable else b"")
            for m in g.members.values())
        return 0, GroupSummary(g.group_id, g.state.value, g.protocol_type or "",
                               (g.protocol_name or "") if stable else "", members)

    def list_groups(self, states: list[str] | None = None,
                    types: list[str] | None = None) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]). Every group here is a classic group."""
        err = 0 if self.table.active else E.COORDINATOR_NOT_AVAILABLE
        if self.table.loading:
            err = E.COORDINATOR_LOAD_IN_PROGRESS
        want_states = {s.lower() for s in states or []}
        if types and "classic" not in {t.lower() for t in types}:
            return err, []
        out = []
        for g in self.table.groups.values():
            if g.state is DEAD or g.partition not in self.table.owned:
                continue
            if want_states and g.state.value.lower() not in want_states:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return err, out
