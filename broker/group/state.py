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

import heapq

from . import records as rec
from .core import (
    DEAD,
    EMPTY,
    GROUP_OPERATIONS,
    STABLE,
    E,
    Settings,
    TimerKey,
)
from .loading import PartitionLoading
from .membership import Membership
from .model import (
    Effects,
    GroupSummary,
    MemberSummary,
    Write,
)
from .offsets import Offsets

__all__ = ["GROUP_OPERATIONS", "GroupStateMachine", "Settings"]


class GroupStateMachine(Membership, Offsets, PartitionLoading):
    """The group coordinator's state machine: the parts composed, plus time and the admin reads."""

    def drain(self) -> Effects:
        """The effects accumulated since the last drain: records to write, then replies."""
        fx, self._fx = self._fx, Effects()
        return fx

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and self._timers.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tick(self, now: int) -> None:
        """Fire every timer due at `now`."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._timers.get(key) != at:
                continue
            del self._timers[key]
            self._fire(key, now)

    def _fire(self, key: TimerKey, now: int) -> None:
        kind = key[0]
        if kind == "expire":
            self.expire_offsets(now)
            self._schedule(("expire",), now + self.settings.offsets_retention_check_interval_ms)
            return
        g = self.groups.get(key[1])
        if g is None:
            return
        if kind == "member":
            self._on_session_deadline(g, key[2], now)
        elif kind == "pending":
            self._on_pending_deadline(g, key[2], now)
        elif kind == "join":
            self._on_join_deadline(g, now)
        elif kind == "sync":
            self._on_sync_deadline(g, now)

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        dead = GroupSummary(group_id, DEAD.value, "", "", ())
        err = self.coordinator_error(group_id)
        if err:
            return err, dead
        g = self.groups.get(group_id)
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
        err = 0 if self.active else E.COORDINATOR_NOT_AVAILABLE
        if self.loading:
            err = E.COORDINATOR_LOAD_IN_PROGRESS
        want_states = {s.lower() for s in states or []}
        if types and "classic" not in {t.lower() for t in types}:
            return err, []
        out = []
        for g in self.groups.values():
            if g.state is DEAD or g.partition not in self.owned:
                continue
            if want_states and g.state.value.lower() not in want_states:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return err, out

    def delete_groups(self, group_ids: list[str], now: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            if gid in out:
                continue
            err = self.coordinator_error(gid)
            if err:
                out[gid] = err
                continue
            g = self.groups.get(gid)
            if g is None or g.state is DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif g.state is not EMPTY:
                out[gid] = E.NON_EMPTY_GROUP
            else:
                for tp in list(g.offsets):
                    self._fx.writes.append(Write(g.partition, rec.encode_key(rec.OffsetKey(gid, *tp)), None))
                g.offsets.clear()
                self._delete_group(g, now)
                out[gid] = 0
        return out
