"""A deterministic simulation of the metadata quorum (broker/quorum/node.py).

Many QuorumNodes in one process, one seeded RNG deciding everything: which message arrives next
(so messages are delayed and reordered), which are dropped or duplicated, when the network
splits and heals, when a node crashes (losing whatever it had not persisted: its pending Ready
is thrown away) and restarts from its durable state, when a node takes its Ready and when the
persist of that Ready completes (in between, the node keeps receiving messages, ticks and
proposals, as the shell's node does while its I/O thread writes), takes a snapshot, hands leadership over (EndQuorumEpoch), or when the leader is given a proposal. After every step the checker verifies Raft's
safety properties:

* at most one leader per epoch (ever);
* log matching: two logs that hold an entry with the same offset and epoch are identical up to it;
* leader completeness: a new leader's log holds every entry committed before it was elected;
* a committed entry is never lost or changed, and every state machine is a prefix of the
  committed sequence, applied in order;
* leases (broker/quorum/lease.py): while a leader's lease holds, no later epoch has a leader.
  Time is the count of ticks, which every live node takes together; an entry's append time is
  the tick of the step that appended it (its messages leave in a later step).

A run is a pure function of its seed, so a failure prints the seed and how to replay it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.quorum.lease import lease_holds
from broker.quorum.messages import Entry, Message
from broker.quorum.node import Persisted, QuorumConfig, QuorumNode, Ready, Role


class Violation(AssertionError):
    pass


@dataclass
class SimNode:
    node: QuorumNode
    disk: Persisted
    applied: list[bytes] = field(default_factory=list)  # the state machine: payloads in order
    next_offset: int = 0  # the offset the state machine applies next
    alive: bool = True
    persisting: Ready | None = None  # taken from the node and being written (the shell's I/O thread)
    was_leader_in: int = -1  # the epoch in which completeness was last checked


def _apply_to_disk(disk: Persisted, ready: Ready) -> Persisted:
    """What the shell does with a Ready before sending anything: snapshot, vote, truncate, append."""
    entries = list(disk.entries)
    snapshot = disk.snapshot
    if ready.snapshot is not None:
        snapshot = ready.snapshot
        entries = [e for e in entries if e.offset >= snapshot.end_offset]
    if ready.truncate_to is not None:
        entries = [e for e in entries if e.offset < ready.truncate_to]
    entries += list(ready.entries)
    epoch, voted = ready.hard_state if ready.hard_state is not None else (disk.epoch, disk.voted_for)
    start = snapshot.end_offset if snapshot else 0
    entries = [e for e in entries if e.offset >= start]
    return Persisted(epoch, voted, snapshot, tuple(entries))


class QuorumSim:
    def __init__(self, seed: int, voters: int = 3, *, faults: bool = True,
                 node_factory: Callable[..., QuorumNode] = QuorumNode, config: QuorumConfig | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.ids = frozenset(range(1, voters + 1))
        self.faults = faults
        self.factory = node_factory
        self.cfg = config or QuorumConfig()
        self.nodes = {i: self._boot(i, Persisted()) for i in sorted(self.ids)}
        self.wire: list[tuple[int, int, Message]] = []  # (src, dst, msg) in flight, any order
        self.groups: list[frozenset[int]] | None = None  # a network split, if any
        self.committed: list[tuple[int, bytes]] = []  # (epoch, data) by offset: everything ever committed
        self.payloads: list[bytes] = []  # the committed non-empty data, in order
        self.payloads_before: list[int] = [0]  # offset -> how many payloads lie below it
        self.leaders: dict[int, int] = {}  # epoch -> the node that led it
        self.ticks = 0
        # (leader, epoch) -> tick each of its entries was appended at, and where that record ends
        self.appended: dict[tuple[int, int], dict[int, int]] = {}
        self.appended_end: dict[tuple[int, int], int] = {}
        self.deposed_checked = 0  # steps at which a deposed leader still led (the lease check had work)
        self.proposed = 0
        self.steps = 0
        self.trace: list[str] = []

    def _boot(self, i: int, disk: Persisted) -> SimNode:
        node = self.factory(i, self.ids, disk, self.cfg, random.Random(self.rng.random()))
        sn = SimNode(node, disk)
        if disk.snapshot is not None:
            sn.applied = [bytes.fromhex(x) for x in json.loads(disk.snapshot.data)]
            sn.next_offset = disk.snapshot.end_offset
        self.restored(sn)
        return sn

    # ---- what a subclass may change: the proposals and the state machine ------------------------------
    def propose(self, sn: SimNode) -> None:
        sn.node.propose(b"v%d" % self.proposed)

    def applied(self, sn: SimNode, entry: Entry) -> None:
        """Called after `entry` joined `sn`'s state machine (checked against the committed sequence)."""

    def restored(self, sn: SimNode) -> None:
        """Called after `sn`'s state machine was rebuilt from a snapshot (at boot or sent by the leader)."""

    # ---- actions -------------------------------------------------------------------------------------
    def _connected(self, a: int, b: int) -> bool:
        return self.groups is None or any(a in g and b in g for g in self.groups)

    def _take_ready(self, sn: SimNode) -> None:
        sn.persisting = sn.node.ready()

    def _persisted(self, sn: SimNode) -> None:
        """The persist of the Ready in flight returned: only now its messages leave and its
        committed entries are applied, then the node advances."""
        ready = sn.persisting
        assert ready is not None
        sn.persisting = None
        sn.disk = _apply_to_disk(sn.disk, ready)
        for dst, msg in ready.messages:
            self.wire.append((sn.node.id, dst, msg))
        if ready.restore is not None:
            sn.applied = [bytes.fromhex(x) for x in json.loads(ready.restore.data)]
            sn.next_offset = ready.restore.end_offset
            self._check_state_machine(sn)
            self.restored(sn)
        for e in ready.committed:
            self._commit(sn, e)
        sn.node.advance(ready)

    def _commit(self, sn: SimNode, e: Entry) -> None:
        if e.offset != sn.next_offset:
            raise Violation(f"node {sn.node.id} applies offset {e.offset}, expected {sn.next_offset}")
        if e.offset < len(self.committed):
            if self.committed[e.offset] != (e.epoch, e.data):
                raise Violation(f"offset {e.offset} committed as {self.committed[e.offset]} and later as "
                                f"{(e.epoch, e.data)} (node {sn.node.id})")
        elif e.offset == len(self.committed):
            self.committed.append((e.epoch, e.data))
            self.payloads_before.append(self.payloads_before[-1] + (1 if e.data else 0))
            if e.data:
                self.payloads.append(e.data)
        else:
            raise Violation(f"node {sn.node.id} commits offset {e.offset} past the committed end {len(self.committed)}")
        if e.data:
            sn.applied.append(e.data)
        sn.next_offset = e.offset + 1
        self._check_state_machine(sn)
        self.applied(sn, e)

    def _check_state_machine(self, sn: SimNode) -> None:
        """The node's state machine holds exactly the committed payloads below its next offset."""
        if sn.next_offset >= len(self.payloads_before):
            raise Violation(f"node {sn.node.id} applied up to {sn.next_offset}, past everything committed")
        expected = self.payloads[:self.payloads_before[sn.next_offset]]
        if sn.applied != expected:
            raise Violation(f"node {sn.node.id}: state machine ends {sn.applied[-3:]}, committed sequence ends "
                            f"{expected[-3:]} ({len(sn.applied)} vs {len(expected)} payloads)")

    def step(self) -> None:
        self.steps += 1
        r = self.rng.random()
        alive = [sn for sn in self.nodes.values() if sn.alive]
        # Time passes slowly next to message delivery, as in a network whose latency is far below
        # the election timeout; messages mostly arrive oldest first, but any may overtake others.
        if r < 0.06:
            self.ticks += 1
            for sn in alive:
                sn.node.tick()
            self.trace.append("tick")
        elif r < 0.52:
            if self.wire:
                i = min(int(self.rng.expovariate(0.7)), len(self.wire) - 1)
                src, dst, msg = self.wire.pop(i)
                target = self.nodes[dst]
                if target.alive and self._connected(src, dst):
                    target.node.receive(src, msg)
                    self.trace.append(f"{src}->{dst} {msg}")
        elif r < 0.84:
            busy = [sn for sn in alive if sn.persisting is not None or sn.node.has_ready()]
            if busy:
                sn = self.rng.choice(busy)
                if sn.persisting is None:
                    self._take_ready(sn)
                    self.trace.append(f"ready {sn.node.id}")
                    if self.rng.random() < 0.5:  # a fast disk: the persist returns in the same step
                        self._persisted(sn)
                        self.trace.append(f"persisted {sn.node.id}")
                else:
                    self._persisted(sn)
                    self.trace.append(f"persisted {sn.node.id}")
        elif r < 0.90:
            for sn in alive:
                if sn.node.role == Role.LEADER:
                    self.proposed += 1
                    self.propose(sn)
                    self.trace.append(f"propose at {sn.node.id}")
        elif r < 0.9015:
            for sn in alive:
                if sn.node.role == Role.LEADER:
                    sn.node.resign()  # a clean shutdown's handover, the node staying up
                    self.trace.append(f"resign {sn.node.id}")
        elif r < 0.92:
            sn = self.rng.choice(alive) if alive else None
            # the shell snapshots right after an advance, never while a persist is in flight
            if sn is not None and sn.persisting is None and sn.next_offset > sn.node.log_start:
                end = sn.next_offset
                data = json.dumps([d.hex() for d in sn.applied]).encode()
                sn.node.take_snapshot(end, data)
                self.trace.append(f"snapshot {sn.node.id} at {end}")
        elif not self.faults:
            pass
        elif r < 0.94:
            if self.wire:
                i = self.rng.randrange(len(self.wire))
                if self.rng.random() < 0.6:
                    self.wire.pop(i)
                    self.trace.append("drop")
                else:
                    self.wire.append(self.wire[i])
                    self.trace.append("duplicate")
        elif r < 0.943:
            sn = self.rng.choice(list(self.nodes.values()))
            if sn.alive:
                sn.alive = False  # its unprocessed Ready (unpersisted state, unsent messages) is lost
                if sn.persisting is not None and self.rng.random() < 0.5:
                    sn.disk = _apply_to_disk(sn.disk, sn.persisting)  # written, but nothing sent yet
                sn.persisting = None
                self.trace.append(f"crash {sn.node.id}")
            else:
                self.nodes[sn.node.id] = self._boot(sn.node.id, sn.disk)
                self.trace.append(f"restart {sn.node.id}")
        elif r < 0.945:
            if self.groups is None:
                ids = sorted(self.ids)
                self.rng.shuffle(ids)
                cut = self.rng.randrange(1, len(ids))
                self.groups = [frozenset(ids[:cut]), frozenset(ids[cut:])]
                self.trace.append(f"split {self.groups}")
            else:
                self.groups = None
                self.trace.append("heal")
        self.check()

    # ---- the checker ----------------------------------------------------------------------------------
    def check(self) -> None:
        live = [sn for sn in self.nodes.values() if sn.alive]
        for sn in live:
            n = sn.node
            if n.role == Role.LEADER:
                other = self.leaders.setdefault(n.epoch, n.id)
                if other != n.id:
                    raise Violation(f"two leaders in epoch {n.epoch}: nodes {other} and {n.id}")
                if sn.was_leader_in != n.epoch:
                    sn.was_leader_in = n.epoch
                    self._check_completeness(n)
        if self.steps % 8 == 0:
            self._check_log_matching(live)
        self._check_leases(live)

    def _check_leases(self, live: list[SimNode]) -> None:
        newest = max(self.leaders, default=-1)
        for sn in live:
            n = sn.node
            if n.role != Role.LEADER:
                continue
            stamps = self.appended.setdefault((n.id, n.epoch), {})
            # a leader only appends: date the offsets past the last one dated
            start = max(n.epoch_start_offset, n.log_start, self.appended_end.get((n.id, n.epoch), 0))
            for offset in range(start, n.log_end):
                stamps[offset] = self.ticks
            self.appended_end[(n.id, n.epoch)] = max(start, n.log_end)
            if newest <= n.epoch:
                continue  # no later leader to overlap with
            self.deposed_checked += 1
            confirmed = {v: stamps.get(o) for v, o in n.lease_confirmations().items()}
            if lease_holds(self.ticks, self.cfg.fetch_timeout_ticks, n.id, self.ids, confirmed):
                raise Violation(f"node {n.id} holds a lease in epoch {n.epoch} while node "
                                f"{self.leaders[newest]} was elected in epoch {newest}")

    def _check_completeness(self, n: QuorumNode) -> None:
        for offset, (epoch, data) in enumerate(self.committed):
            if offset < n.log_start:
                continue
            e = n.log[offset - n.log_start] if offset < n.log_end else None
            if e is None or (e.epoch, e.data) != (epoch, data):
                raise Violation(f"node {n.id} leads epoch {n.epoch} without committed offset {offset} "
                                f"({(epoch, data)}); it has {e}")

    @staticmethod
    def _check_log_matching(live: list[SimNode]) -> None:
        for i, a in enumerate(live):
            for b in live[i + 1:]:
                x, y = a.node, b.node
                lo, hi = max(x.log_start, y.log_start), min(x.log_end, y.log_end)
                k = hi - 1
                while k >= lo and x.log[k - x.log_start].epoch != y.log[k - y.log_start].epoch:
                    k -= 1
                if k < lo:
                    continue
                if x.log[lo - x.log_start:k + 1 - x.log_start] != y.log[lo - y.log_start:k + 1 - y.log_start]:
                    raise Violation(f"log matching: nodes {x.id} and {y.id} agree on the epoch at offset {k} "
                                    "but differ before it")

    # ---- runs ----------------------------------------------------------------------------------------
    def run(self, steps: int) -> None:
        try:
            for _ in range(steps):
                self.step()
        except Violation as v:
            raise Violation(f"seed {self.seed}, step {self.steps}: {v}\n  last events: {self.trace[-12:]}\n"
                            f"  replay: KETCH_SIM_SEED={self.seed} .venv/bin/pytest tests/sim -k replay") from None

    def settle(self, max_steps: int = 4000) -> None:
        """Heal everything, restart the dead, and run without faults until one leader has
        committed everything proposed and every node has applied it (liveness)."""
        self.groups = None
        for i, sn in list(self.nodes.items()):
            if not sn.alive:
                self.nodes[i] = self._boot(i, sn.disk)
        self.faults = False
        self.proposed += 1
        final = b"final-%d" % self.proposed
        for _ in range(max_steps):
            self.step()
            for sn in self.nodes.values():
                # a deposed leader's copy may be truncated: propose again until a leader holds it
                if sn.node.role == Role.LEADER and all(e.data != final for e in sn.node.log):
                    sn.node.propose(final)
            if all(final in sn.applied for sn in self.nodes.values()):
                return
        raise Violation(f"seed {self.seed}: no progress after healing ({max_steps} fault-free steps); "
                        f"roles {[(sn.node.id, sn.node.role.value, sn.node.epoch) for sn in self.nodes.values()]}")
