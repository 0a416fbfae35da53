"""What must hold of the brokers' own state at every step of a simulated run.

The history checker judges what clients saw; these judge what the brokers hold, so a violation is
caught the moment it happens, with the step that made it, and not only if a client happened to
read the damage. Checked from outside the brokers (a harness task that belongs to no simulated
process) through Partition's read-only surface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.server import BrokerServer
from broker.txn.state import TxnMetadata
from protocol.batch import iter_batches
from protocol.control import parse_control_record
from protocol.records import decode_batches
from storage.fs import FileSystem

from .workload import COPIER_GROUP


@dataclass
class Invariants:
    violations: list[str] = field(default_factory=list)
    # (topic, partition, leader epoch) -> the node that led at that epoch
    leaders: dict[tuple[str, int, int], int] = field(default_factory=dict)
    # (node, incarnation, topic, partition, leader epoch) -> the highest HW seen there as leader
    hw: dict[tuple[int, int, str, int, int], int] = field(default_factory=dict)

    def fail(self, now: float, what: str) -> None:
        if len(self.violations) < 100:
            self.violations.append(f"t={now:.3f} {what}")

    # (topic, partition, partition epoch), or a coordinator's key, whose state was reported already
    bad_states: set[tuple[Any, ...]] = field(default_factory=set)
    # (topic, partition) -> its ISR as last checked, from the quorum leader's image
    isr: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)

    # (topic, partition) -> the highest leader epoch a leader has been seen at
    latest_epoch: dict[tuple[str, int], int] = field(default_factory=dict)
    # (topic, partition) of the copier's input -> (the highest committed offset a coordinator
    # has served for it, that coordinator's node, its leader epoch)
    copier_offsets: dict[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)

    # a producer-id block, by its end (unique while blocks are disjoint) -> (node, incarnation, lowest id seen)
    pid_blocks: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    def check(self, now: float, brokers: list[tuple[int, int, BrokerServer]]) -> None:
        """`brokers`: (node id, incarnation, server) of every live broker."""
        for node, _inc, b in brokers:
            self.check_image(now, node, b)
        self.check_joins(now, brokers)
        for node, inc, b in brokers:
            alloc = b.producer_ids
            for lo, hi in [(alloc._next, alloc._end), *([alloc._spare] if alloc._spare else [])]:
                self.check_pid_block(now, node, inc, lo, hi)
        for node, _inc, b in brokers:
            self.check_coordinators(now, node, b)
        for node, inc, b in brokers:
            for topic in list(b.topics.by_name.values()):
                for index, p in list(topic.local.items()):
                    if not p.is_leader:
                        continue
                    epoch = p.leader_epoch
                    key = (topic.name, index, epoch)
                    other = self.leaders.setdefault(key, node)
                    if epoch > self.latest_epoch.get((topic.name, index), -1):
                        self.latest_epoch[(topic.name, index)] = epoch
                    if other != node:
                        self.fail(now, f"two leaders of {topic.name}-{index} at leader epoch {epoch}: "
                                       f"nodes {other} and {node}")
                    hw = p.high_watermark
                    hkey = (node, inc, topic.name, index, epoch)
                    before = self.hw.get(hkey, -1)
                    if hw < before:
                        self.fail(now, f"the high watermark of {topic.name}-{index} moved back on leader {node} "
                                       f"(epoch {epoch}): {before} -> {hw}")
                    self.hw[hkey] = max(before, hw)
                    lso = p.last_stable_offset
                    if lso > hw:
                        self.fail(now, f"LSO {lso} above HW {hw} on {topic.name}-{index} (leader {node})")
                    if hw > p.log_end_offset:
                        self.fail(now, f"HW {hw} above the log end {p.log_end_offset} on {topic.name}-{index} "
                                       f"(leader {node})")
        for node, _inc, b in brokers:  # once the latest leader epochs include this check's (seed 5424)
            self.check_copier_offsets(now, node, b)

    def check_coordinators(self, now: float, node: int, b: BrokerServer) -> None:
        """A coordinator serves a partition of its log (its groups, its transactions) only once
        that partition's leader has committed everything its log held when its leader epoch began:
        loaded from less, it would miss what its predecessor acknowledged -- a commit answered
        and then aborted by the reaper, offsets committed and then read from before (issue 23
        items 7 and 8). Once true under an epoch it stays true (the HW never moves back on a
        leader), so a violation is a load finished too early, or a partition kept across a new
        election without loading it again."""
        for topic, owned in (("__consumer_offsets", b.groups.sm.owned), ("__transaction_state", b.txn._owned)):
            for index in sorted(owned):
                p = b.topics.partition(topic, index)
                if p is None or not p.is_leader:
                    continue
                key = ("coordinator", topic, index, node, p.leader_epoch)
                if p.high_watermark < p.leader_epoch_start_offset and key not in self.bad_states:
                    self.bad_states.add(key)
                    self.fail(now, f"node {node} serves {topic}-{index} as coordinator at leader epoch "
                                   f"{p.leader_epoch} with its high watermark {p.high_watermark} below the log end "
                                   f"{p.leader_epoch_start_offset} of the election: loaded from less than its "
                                   "predecessor may have acknowledged")

    def check_copier_offsets(self, now: float, node: int, b: BrokerServer) -> None:
        """The copier's committed offsets, as the coordinator of the latest election of its group's
        partition holds them, never go back: the copier commits only forward (it rewinds its reads
        to them, never its commits), and a coordinator holds a commit only once it is committed in
        the log, which every later leader's load reads (a load that mixed in what a superseded one
        read would not: issue 23 item 8)."""
        owned = b.groups.sm.owned
        g = b.groups.sm.groups.get(COPIER_GROUP)
        if g is None or g.partition not in owned:
            return
        p = b.topics.partition("__consumer_offsets", g.partition)
        if p is None or not p.is_leader or p.leader_epoch < self.latest_epoch.get((p.topic, p.index), -1):
            return  # a zombie of an older election: Kafka's coordinators too serve from memory until they learn
        for tp, e in list(g.offsets.items()):
            key = (tp.topic, tp.partition)
            best = self.copier_offsets.get(key, (-1, 0, 0))
            if e.offset < best[0]:
                self.fail(now, f"node {node} (leader epoch {p.leader_epoch} of __consumer_offsets-{g.partition}) "
                               f"serves the copier's committed offset of {tp.topic}-{tp.partition} as {e.offset}, "
                               f"below {best[0]} served by node {best[1]} at leader epoch {best[2]}")
            if e.offset > best[0]:
                self.copier_offsets[key] = (e.offset, node, p.leader_epoch)

    def check_pid_block(self, now: float, node: int, inc: int, lo: int, hi: int) -> None:
        """Producer-id blocks the controller granted are disjoint, across brokers and each
        broker's incarnations: one id handed to two producers would merge their sequences and
        transactions on every partition both write. `[lo, hi)` is what is left of a block (or
        its spare) as seen now; blocks are told apart by their end."""
        if hi <= lo:
            return
        seen = self.pid_blocks.get(hi)
        if seen is not None and seen[:2] == (node, inc):
            if lo < seen[2]:
                self.pid_blocks[hi] = (node, inc, lo)
            return
        for end, (other, other_inc, other_lo) in self.pid_blocks.items():
            if (other, other_inc) != (node, inc) and lo < end and other_lo < hi:
                self.fail(now, f"producer ids [{lo}, {hi}) of node {node} (incarnation {inc}) overlap "
                               f"[{other_lo}, {end}) of node {other} (incarnation {other_inc})")
        self.pid_blocks.setdefault(hi, (node, inc, lo))

    def check_settled(self, now: float, brokers: list[tuple[int, int, BrokerServer]]) -> None:
        """Once healed and settled (every partition's LSO at its HW, or the settling deadline
        passed; and while a coordinator still holds one, a marker request's timeout after
        healing): no coordinator still owes markers. A transaction prepared this long after the
        faults ended is one whose markers stopped going out -- its output perhaps visible and
        its consumer offsets pending (seed 3258: retries timed on a wall clock stepped back)."""
        for node, meta in prepared(brokers):
            self.fail(now, f"transaction {meta.transactional_id} (producer {meta.producer_id}, epoch "
                           f"{meta.producer_epoch}) still {meta.state.name} on its coordinator, node {node}, "
                           "after healing and settling: its markers stopped going out")

    def check_markers(self, now: float, data_dirs: list[tuple[FileSystem, Path]]) -> None:
        """At the end: no transaction both committed and aborted -- on one partition or across
        them, `__consumer_offsets` included (a transaction's output committed with its offsets
        aborted is a copy made twice), in any replica's log."""
        outcomes: dict[tuple[int, int], set[bool]] = {}
        for fs, root in data_dirs:
            try:
                dirs = [root / n for n in fs.listdir(root) if n.rpartition("-")[2].isdigit()]
            except FileNotFoundError:
                continue
            for key, seen in transaction_outcomes(fs, sorted(dirs)).items():
                outcomes.setdefault(key, set()).update(seen)
        for (pid, epoch), seen in sorted(outcomes.items()):
            if len(seen) > 1:
                self.fail(now, f"the transaction of producer {pid} at epoch {epoch} has both commit and abort markers")

    def check_image(self, now: float, node: int, b: BrokerServer) -> None:
        """The committed partition states as a broker replayed them: a leader is in its ISR and
        the ISR among the replicas. (A change decided on an image that another change in flight
        was about to alter combines with it into a state neither intended, issue 23 item 1.)"""
        image = b.controller.image
        for t in list(image.topics.values()):
            for i, p in enumerate(t.partitions):
                leader_ok = p.leader < 0 or p.leader in p.isr
                if leader_ok and all(r in p.replicas for r in p.isr):
                    continue
                key = (t.name, i, p.partition_epoch)
                if key not in self.bad_states:
                    self.bad_states.add(key)
                    self.fail(now, f"{t.name}-{i} committed with leader {p.leader}, ISR {list(p.isr)}, replicas "
                                   f"{list(p.replicas)} (partition epoch {p.partition_epoch}, as node {node} "
                                   f"replayed it at metadata offset {image.offset})")

    def check_joins(self, now: float, brokers: list[tuple[int, int, BrokerServer]]) -> None:
        """A replica that joins an ISR holds everything below its leader's high watermark: its
        leader asked for it once it had fetched that far, counted it in the HW from then on, and
        its log only grows -- unless it crashed since, when its registration took it out of every
        ISR first and only a request naming its previous incarnation could put it back (KIP-903,
        issue 23 item 3). Checked at the first check that sees it in the ISR, for a replica whose
        current process has registered (before that, the controller cannot know it restarted)."""
        by_node = {node: b for node, _inc, b in brokers}
        lead = next((b for b in by_node.values() if b.quorum.serving), None)
        if lead is None:
            return
        for t in list(lead.controller.image.topics.values()):
            for i, p in enumerate(t.partitions):
                before = self.isr.get((t.name, i))
                self.isr[(t.name, i)] = p.isr
                leader = by_node.get(p.leader)
                lt = leader.topics.get(t.name) if leader is not None else None
                lp = lt.local.get(i) if lt is not None else None
                if before is None or lp is None or not lp.is_leader or lp.leader_epoch != p.leader_epoch:
                    continue
                for r in sorted(set(p.isr) - set(before)):
                    mb = by_node.get(r)
                    mt = mb.topics.get(t.name) if mb is not None else None
                    mp = mt.local.get(i) if mt is not None else None
                    reg = lead.controller.image.broker(r)
                    registered = mb is not None and reg is not None and mb.lifecycle.epoch == reg.epoch
                    if mp is not None and registered and mp.log_end_offset < lp.high_watermark:
                        self.fail(now, f"node {r} joined the ISR of {t.name}-{i} (partition epoch {p.partition_epoch}) "
                                       f"with its log ending at {mp.log_end_offset}, below the high watermark "
                                       f"{lp.high_watermark} of leader {p.leader}")


def prepared(brokers: list[tuple[int, int, BrokerServer]]) -> list[tuple[int, TxnMetadata]]:
    """(node, transaction) of every transaction a live coordinator holds PrepareCommit or PrepareAbort."""
    return [(node, meta) for node, _inc, b in brokers for meta in b.txn.all() if meta.state.is_prepare]


Batch = tuple[int, int, int, int, int, int, bool]


def transaction_outcomes(fs: FileSystem, partition_dirs: list[Path]) -> dict[tuple[int, int], set[bool]]:
    """(producer id, epoch) -> the outcomes (True: commit) of the transaction markers carrying
    them in these replicas' logs. Transactions of the bundled client end with EndTxn v5, which
    bumps the epoch at every end, so a producer id and a marker's epoch name one transaction: its
    markers must agree on every partition (a fenced or timed-out transaction's abort carries an
    epoch of its own too)."""
    out: dict[tuple[int, int], set[bool]] = {}
    for d in partition_dirs:
        try:
            names = sorted(n for n in fs.listdir(d) if n.endswith(".log"))
        except FileNotFoundError:
            continue
        for name in names:
            data = fs.read(d / name)
            for pos, h in iter_batches(data, strict=False):
                if not h.is_control:
                    continue
                for _, recs in decode_batches(bytes(data[pos:pos + h.size])):
                    for r in recs:
                        marker = parse_control_record(r.key, r.value)
                        if marker.is_transaction_marker:
                            out.setdefault((h.producer_id, h.producer_epoch), set()).add(marker.is_commit)
    return out


def replica_batches(fs: FileSystem, partition_dir: Path) -> list[Batch]:
    """(base offset, last offset, crc, producer id, epoch, base sequence, control) of every batch in a
    replica's segment files, in offset order; a torn tail ends the list."""
    try:
        names = sorted(n for n in fs.listdir(partition_dir) if n.endswith(".log"))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        for _, h in iter_batches(fs.read(partition_dir / name), strict=False):
            out.append((h.base_offset, h.last_offset, h.crc, h.producer_id, h.producer_epoch, h.base_sequence,
                        h.is_control))
    return out


def compare_replicas(topic: str, hws: dict[int, int], replicas: list[tuple[int, FileSystem, Path]],
                     fail: Callable[[str], None]) -> dict[str, Any]:
    """Every replica identical below the high watermark (after healing and settling, every
    broker's copy of a committed offset is the same batch). `replicas`: (node, its disk, its
    data dir); `hws`: partition -> its leader's high watermark. Returns the checker's
    `batches` history line: who wrote each stored batch, from the fullest replica."""
    best: dict[int, tuple[int, list[Batch]]] = {}
    for p, hw in sorted(hws.items()):
        copies = [(node, replica_batches(fs, data / f"{topic}-{p}")) for node, fs, data in replicas]
        below = {node: [b for b in got if b[1] < hw] for node, got in copies}
        reference = max(below.items(), key=lambda kv: len(kv[1]))
        for node, got in below.items():
            common = min(len(got), len(reference[1]))  # a replica still catching up has less
            diverge = next((i for i in range(common) if got[i] != reference[1][i]), None)
            if diverge is not None:
                fail(f"replicas of {topic}-{p} differ below the HW {hw}: node {node} has {got[diverge]} where "
                     f"node {reference[0]} has {reference[1][diverge]} (batch #{diverge})")
        node, fullest = max(copies, key=lambda kv: kv[1][-1][1] if kv[1] else -1)
        best[p] = (node, fullest)
    return {"f": "batches", "topic": topic,
            "partitions": {str(p): {"node": node, "batches": [[b[0], b[1], b[3], b[4], b[5]] for b in got
                                                              if b[3] >= 0 and not b[6]]}
                           for p, (node, got) in sorted(best.items())}}
