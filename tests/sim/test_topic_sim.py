"""Issue 13: the controller's topic decisions under the quorum simulation.

Every node replays its committed log into a QuorumController; the leader, once serving, creates
or deletes topics one decision at a time — decided on its committed image, proposed, and the
next one only after it committed or leadership changed — as broker/controller/shell.py does.
Through crashes, splits, truncated proposals and leader changes, every committed entry must apply
on every node (a topic named twice, or a partition of a deleted topic, would not: the controller
decided on a stale view), and every node's image at the same offset must be the same.
"""

from __future__ import annotations

import os
import uuid

import pytest
from helpers.quorum_sim import QuorumSim, SimNode, Violation

from broker.controller.quorum_controller import QuorumController
from broker.quorum.messages import Entry
from broker.quorum.node import Role
from protocol.errors import KafkaError
from protocol.messages.metadata_records import unframe_batch

SEEDS = int(os.environ.get("KETCH_SIM_SEEDS", "2000")) // 8
STEPS = 3000
NAMES = ("a", "b", "c")


class TopicSim(QuorumSim):
    def __init__(self, seed: int, one_at_a_time: bool = True) -> None:
        self.one_at_a_time = one_at_a_time
        self.controllers: dict[int, QuorumController] = {}
        self.seen: dict[int, tuple[Role, int]] = {}
        self.in_flight: dict[int, int] = {}  # node -> offset of its proposal not yet committed
        self.images: dict[int, object] = {}  # offset -> the first node's topics after applying it
        self.changes = 0
        super().__init__(seed, voters=3 if seed % 2 else 5)

    def restored(self, sn: SimNode) -> None:
        c = QuorumController()
        for i, payload in enumerate(sn.applied):
            if payload:
                self._replay(sn, c, Entry(i, 0, payload))
        self.controllers[sn.node.id] = c
        self.in_flight.pop(sn.node.id, None)
        self.seen.pop(sn.node.id, None)

    def _replay(self, sn: SimNode, c: QuorumController, entry: Entry) -> None:
        try:
            c.metadata.replay_all(entry.offset, unframe_batch(entry.data))
        except ValueError as e:
            raise Violation(f"node {sn.node.id} cannot apply committed entry {entry.offset}: {e}") from None

    def propose(self, sn: SimNode) -> None:
        n = sn.node
        if self.seen.get(n.id) != (n.role, n.epoch):
            self.seen[n.id] = (n.role, n.epoch)
            self.in_flight.pop(n.id, None)  # a proposal of a lost leadership: the shell gave up on it
        if not n.serving or (self.one_at_a_time and n.id in self.in_flight):
            return
        c = self.controllers[n.id]
        b = c.image.broker(n.id)
        name = self.rng.choice(NAMES)
        entry: bytes | None
        try:
            if b is None:  # the leader's broker registers, then is unfenced: topics need a live broker
                entry = c.register_broker(n.id, uuid.uuid4(), [("PLAINTEXT", "h", 1)], None, 0)[0]
            elif b.fenced:
                entry = c.heartbeat(n.id, b.epoch, c.image.offset, False, False, 0)[1]
            elif name in c.image.topics:
                entry = c.delete_topic(name)[0]
            else:
                entry = c.create_topic(name, 2, 1, {"retention.ms": "1"})[0]
        except KafkaError:
            return
        if entry is None:
            return
        offset = n.propose(entry)
        assert offset is not None
        self.in_flight[n.id] = offset

    def applied(self, sn: SimNode, entry: Entry) -> None:
        if self.in_flight.get(sn.node.id) == entry.offset:
            del self.in_flight[sn.node.id]
        if not entry.data:
            return
        c = self.controllers[sn.node.id]
        self._replay(sn, c, entry)
        self.changes += 1
        topics = {k: (v.topic_id, v.partitions, dict(v.configs)) for k, v in c.image.topics.items()}
        first = self.images.setdefault(entry.offset, topics)
        if first != topics:
            raise Violation(f"node {sn.node.id} has other topics than another node after entry {entry.offset}")


@pytest.mark.parametrize("chunk", range(2))
def test_every_committed_topic_change_applies_on_every_node(chunk: int) -> None:
    changes = 0
    for seed in range(chunk * SEEDS, (chunk + 1) * SEEDS):
        sim = TopicSim(seed)
        sim.run(STEPS)
        changes += sim.changes
    assert changes >= SEEDS  # topics were created and deleted, through all the faults


def test_the_checker_catches_decisions_taken_while_one_is_in_flight() -> None:
    caught = None
    for seed in range(300):
        try:
            TopicSim(seed, one_at_a_time=False).run(STEPS)
        except Violation as v:
            caught = str(v)
            break
    assert caught is not None and "cannot apply" in caught
