"""The nemesis: a seeded schedule of faults and the code that inflicts and heals each one.

The schedule is a pure function of the seed (``Schedule(seed, kinds)`` yields the same faults in the
same order with the same holds every time), so a failing campaign is replayed by its seed. What a
fault hits at run time can depend on the cluster: role targets ("the leader of mixed-2", "the quorum
leader") are resolved when the fault starts, and the resolved node is logged. Timing is not replayed
exactly (processes and kernels schedule as they will); the order, the kinds and the targets are.

Every fault leaves a majority of brokers running (one broker is killed, paused or cut off at a time),
because that is the promise under test: with RF 3 and min.insync.replicas 2, committed writes and
transactions survive any single broker's failure. All deadlines are monotonic.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .cluster import NetCluster
from .net import CLIENT

# Each kind, and what it does while held.
KINDS: dict[str, str] = {
    "kill": "SIGKILL a broker, restart it on the same data after the hold",
    "kill-leader": "SIGKILL the leader of a workload partition, restart it after the hold",
    "kill-controller": "SIGKILL the metadata quorum's leader, restart it after the hold",
    "pause-leader": "SIGSTOP a partition leader; SIGCONT after it has been replaced",
    "torn-write": "SIGKILL a broker, cut or garble the tail of a partition's active segment, restart",
    "isolate-leader": "partition a partition leader from the other brokers (clients still reach it)",
    "partition-minority": "partition one broker from the other two",
    "partition-bridge": "two brokers cannot reach each other; the third sees both",
    "one-way": "one broker drops everything another sends it (the reverse direction works)",
    "client-cut": "the clients cannot reach one broker",
    "loss": "one broker drops 30% of the packets it receives",
    "slow": "one broker's outgoing link is a 512 kbit/s token bucket",
}


@dataclass(frozen=True)
class Fault:
    kind: str
    node: int  # a broker chosen by the schedule (used when the kind has no role target, or none resolves)
    other: int  # a second broker, for kinds that need two
    partition: int  # the workload partition whose leader a role kind targets
    hold: float  # seconds the fault is held before it is healed
    cut: int  # torn-write: bytes cut off (>0) or garbage bytes appended (<0)


class Schedule:
    """An endless, seed-determined stream of faults; every kind in `kinds` comes once before any
    comes twice, then kinds are drawn at random."""

    def __init__(self, seed: int, kinds: Sequence[str], nodes: Sequence[int], partitions: int,
                 hold: tuple[float, float]) -> None:
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        self.rng = random.Random(seed)
        self.kinds, self.nodes, self.partitions, self.hold = list(kinds), list(nodes), partitions, hold

    def __iter__(self) -> Iterator[Fault]:
        first = list(self.kinds)
        self.rng.shuffle(first)
        while True:
            kind = first.pop(0) if first else self.rng.choice(self.kinds)
            node, other = self.rng.sample(self.nodes, 2)
            cut = self.rng.randint(1, 48) * self.rng.choice((1, -1))
            yield Fault(kind, node, other, self.rng.randrange(self.partitions),
                        round(self.rng.uniform(*self.hold), 2), cut)


@dataclass
class Cycle:
    """One fault as it happened: what, whom, and how long the cluster took to serve again."""

    n: int
    fault: Fault
    target: int
    started: float
    detail: dict[str, Any] = field(default_factory=dict)
    healed: float | None = None
    recovery_s: float | None = None  # heal -> produce and read_committed consume work again

    def to_json(self) -> dict[str, Any]:
        # Times are time.monotonic(), the clock the workload's history uses: faults line up with ops.
        return {"n": self.n, "kind": self.fault.kind, "target": self.target, "hold_s": self.fault.hold,
                "t_started": round(self.started, 3),
                "t_healed": None if self.healed is None else round(self.healed, 3),
                "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 2),
                **self.detail}


class Nemesis:
    """Inflicts one fault at a time on a NetCluster and heals it."""

    def __init__(self, cluster: NetCluster, topic: str) -> None:
        self.cluster, self.net, self.topic = cluster, cluster.net, topic

    def _target(self, f: Fault) -> int:
        role: int | None = None
        if f.kind in ("kill-leader", "pause-leader", "isolate-leader"):
            role = self.cluster.leader_of(self.topic, f.partition)
        elif f.kind == "kill-controller":
            role = self.cluster.controller()
        return role if role is not None else f.node

    def inflict(self, n: int, f: Fault) -> Cycle:
        target = self._target(f)
        cycle = Cycle(n, f, target, time.monotonic())
        others = [b for b in self.cluster.node_ids if b != target]
        if f.kind in ("kill", "kill-leader", "kill-controller", "torn-write"):
            self.cluster.kill(target)
            if f.kind == "torn-write":
                cycle.detail["torn"] = self._tear(target, f)
        elif f.kind == "pause-leader":
            self.cluster.pause(target)
        elif f.kind in ("isolate-leader", "partition-minority"):
            self.net.partition([target], others)
        elif f.kind == "partition-bridge":
            a, c = others
            self.net.partition([a], [c])
            cycle.detail["sides"] = [a, c]
        elif f.kind == "one-way":
            other = f.other if f.other != target else others[0]
            self.net.drop(target, [other])
            cycle.detail["drops_from"] = other
        elif f.kind == "client-cut":
            self.net.partition([CLIENT], [target])
        elif f.kind == "loss":
            self.net.lose(target, 0.3)
        elif f.kind == "slow":
            self.net.slow(target, 512)
        return cycle

    def heal(self, cycle: Cycle | None = None) -> None:
        """Undo any fault: clear the network, wake what was paused, restart what was killed."""
        self.net.heal()
        for b in self.cluster:
            if b.paused:
                b.resume()
            if not b.is_running():
                b.kill()  # reap
                b.start(timeout=90)
        if cycle is not None:
            cycle.healed = time.monotonic()

    def _tear(self, node: int, f: Fault) -> dict[str, Any]:
        """What a crash in the middle of a write leaves: the last batch cut short, or a few bytes of
        a batch that never finished. Only a partition log of the workload topic is torn (not the
        metadata log, whose writes are fsynced before they count)."""
        d = self.cluster.partition_dir(node, self.topic, f.partition)
        segs = sorted(d.glob("*.log"))
        if not segs:
            return {"partition": f.partition, "segment": None}
        seg = segs[-1]
        size = seg.stat().st_size
        with seg.open("r+b") as fh:
            if f.cut > 0:
                fh.truncate(max(0, size - f.cut))
            else:
                fh.seek(0, 2)
                fh.write(random.Random(f.cut).randbytes(-f.cut))
        return {"partition": f.partition, "segment": seg.name, "size": size, "cut": f.cut}
