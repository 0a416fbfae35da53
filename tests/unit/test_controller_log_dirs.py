"""The controller's side of a failed log directory (KIP-858), sans-IO: brokers register their log
directories, assign each replica to one (AssignReplicasToDirs), and report failed ones in their
heartbeats; a replica in a failed directory leaves the ISR, loses its leadership to another
in-sync replica, and is neither elected nor readmitted while its directory is offline. (Across
three broker processes: tests/cluster/test_log_dir_failure_cluster.py.)"""

from __future__ import annotations

import uuid

from broker.controller.quorum_controller import QuorumController
from broker.metadata.image import LOST_DIR, MetadataImage
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import unframe_batch
from protocol.topic_partition import TopicPartition

LISTENERS = [("PLAINTEXT", "h", 9092), ("BROKER", "h", 9093)]
DIRS = {n: (uuid.uuid4(), uuid.uuid4()) for n in (1, 2, 3)}  # each broker's disk-a, disk-b


class Cluster:
    """A controller with brokers 1-3 registered with two log directories each and unfenced, and a
    topic `t` of two partitions on [1, 2, 3], both led by 1."""

    def __init__(self) -> None:
        self.c = QuorumController(session_timeout_ms=10_000)
        self.offset = 0
        self.epochs: dict[int, int] = {}
        for n in (1, 2, 3):
            self.register(n, DIRS[n])
            self.beat(n)
        entry, self.topic_id = self.c.create_topic("t", 2, 3, {}, assignments=[[1, 2, 3], [1, 2, 3]])
        self.commit(entry)

    def commit(self, entry: bytes | None) -> None:
        assert entry is not None
        self.c.metadata.replay_all(self.offset, unframe_batch(entry))
        self.offset += 1

    def register(self, n: int, dirs: tuple[uuid.UUID, ...]) -> None:
        entry, self.epochs[n] = self.c.register_broker(n, uuid.uuid4(), LISTENERS, None, 0, log_dirs=list(dirs))
        self.commit(entry)

    def beat(self, n: int, offline: tuple[uuid.UUID, ...] = ()) -> bytes | None:
        error, entry, _, _, _ = self.c.heartbeat(n, self.epochs[n], self.offset, False, False, 0,
                                                 offline_dirs=list(offline))
        assert error == 0
        if entry is not None:
            self.commit(entry)
        return entry

    def assign(self, n: int, d: uuid.UUID, *partitions: int) -> dict[tuple[uuid.UUID, int], int]:
        error, entry, outcome = self.c.assign_replicas_to_dirs(n, self.epochs[n],
                                                               [(d, self.topic_id, i) for i in partitions])
        assert error == 0
        if entry is not None:
            self.commit(entry)
        return outcome

    def part(self, i: int) -> tuple[int, tuple[int, ...]]:
        p = self.c.image.topics["t"].partitions[i]
        return p.leader, p.isr


def test_a_dir_failing_moves_the_leaderships_and_isr_places_of_its_replicas_only() -> None:
    k = Cluster()
    a1, b1 = DIRS[1]
    assert k.assign(1, a1, 0) == {(k.topic_id, 0): 0}
    assert k.assign(1, b1, 1) == {(k.topic_id, 1): 0}
    assert k.part(0) == k.part(1) == (1, (1, 2, 3))  # an assignment alone changes no leader or ISR
    assert k.beat(1, offline=(b1,)) is not None
    assert k.part(1) == (2, (2, 3))  # the next in-sync replica leads
    assert k.part(0) == (1, (1, 2, 3))  # the other directory's partition stays as it was
    b = k.c.image.broker(1)
    assert b is not None and b.log_dirs == (a1,) and not b.fenced  # the broker itself stays in
    assert k.beat(1, offline=(b1,)) is None  # reported again: nothing new to decide
    assert MetadataImage.from_snapshot(k.c.image.to_snapshot()) == k.c.image


def test_an_assignment_to_a_dir_already_offline_takes_the_replica_out() -> None:
    """The broker may report the failure before the controller learnt which replicas the
    directory held: the assignment that follows takes them out then."""
    k = Cluster()
    a1, b1 = DIRS[1]
    k.beat(1, offline=(b1,))
    assert k.part(1) == (1, (1, 2, 3))  # nothing known to be there yet
    k.assign(1, b1, 1)
    assert k.part(1) == (2, (2, 3))
    assert not k.c.image.replica_online(k.c.image.topics["t"].partitions[1], 1)
    assert k.c.image.replica_online(k.c.image.topics["t"].partitions[0], 1)  # unassigned: online


def test_a_replica_in_an_offline_dir_is_neither_readmitted_nor_elected() -> None:
    k = Cluster()
    _, b1 = DIRS[1]
    k.assign(1, b1, 1)
    k.beat(1, offline=(b1,))
    p = k.c.image.topics["t"].partitions[1]
    code, _ = k.c.alter_partition(2, k.epochs[2], k.topic_id, 1, p.leader_epoch, p.partition_epoch,
                                  [(2, k.epochs[2]), (3, k.epochs[3]), (1, k.epochs[1])])
    assert code == ErrorCode.INELIGIBLE_REPLICA
    entry, outcome = k.c.elect_leaders([TopicPartition("t", 1)], unclean=False)
    assert entry is None and outcome[TopicPartition("t", 1)] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    # the two in-sync replicas stop: the one in the failed directory may not take over
    for n in (2, 3):
        error, entry, _, _, _ = k.c.heartbeat(n, k.epochs[n], k.offset, True, False, 0)
        assert error == 0
        k.commit(entry)
    assert k.c.image.topics["t"].partitions[1].leader == -1
    entry, outcome = k.c.elect_leaders([TopicPartition("t", 1)], unclean=True)
    assert entry is None and outcome[TopicPartition("t", 1)] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_a_broker_registering_with_the_dir_back_may_hold_its_replicas_again() -> None:
    k = Cluster()
    _, b1 = DIRS[1]
    k.assign(1, b1, 1)
    k.beat(1, offline=(b1,))
    k.register(1, DIRS[1])  # restarted with the disk answering again
    assert k.c.image.replica_online(k.c.image.topics["t"].partitions[1], 1)


def test_assignments_are_refused_for_unknown_partitions_and_stale_brokers() -> None:
    k = Cluster()
    a2, _ = DIRS[2]
    unknown = uuid.uuid4()
    error, entry, outcome = k.c.assign_replicas_to_dirs(2, k.epochs[2], [
        (a2, unknown, 0), (a2, k.topic_id, 7), (a2, k.topic_id, 0)])
    assert error == 0 and entry is not None
    assert outcome == {(unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID, (k.topic_id, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       (k.topic_id, 0): 0}
    error, entry, _ = k.c.assign_replicas_to_dirs(2, k.epochs[2] - 1, [(a2, k.topic_id, 0)])
    assert (error, entry) == (ErrorCode.STALE_BROKER_EPOCH, None)
    entry, _ = k.c.create_topic("u", 1, 2, {}, assignments=[[2, 3]])
    k.commit(entry)
    u = k.c.image.topics["u"].topic_id
    error, entry, outcome = k.c.assign_replicas_to_dirs(1, k.epochs[1], [(DIRS[1][0], u, 0)])
    assert error == 0 and entry is None and outcome == {(u, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}


def test_a_replica_assigned_back_to_an_online_dir_leads_the_partition_it_was_last_to_lead() -> None:
    """A broker restarted without a disk marks the replicas it cannot find LOST; once the disk is
    back, its next registration lists the directory and the assignment naming it again lets the
    replica lead the partition nobody could lead meanwhile (its last known leader, KIP-966)."""
    k = Cluster()
    a1, b1 = DIRS[1]
    entry, _ = k.c.create_topic("solo", 1, 1, {}, assignments=[[1]])
    k.commit(entry)
    solo = k.c.image.topics["solo"].topic_id
    k.register(1, (a1,))  # restarted with disk-b missing
    k.beat(1)  # unfenced
    error, entry, _ = k.c.assign_replicas_to_dirs(1, k.epochs[1], [(LOST_DIR, solo, 0)])
    k.commit(entry)
    assert k.c.image.topics["solo"].partitions[0].leader == -1
    k.register(1, (a1, b1))  # the disk is back
    k.beat(1)
    assert k.c.image.topics["solo"].partitions[0].leader == -1  # still LOST as far as the controller knows
    error, entry, _ = k.c.assign_replicas_to_dirs(1, k.epochs[1], [(b1, solo, 0)])
    k.commit(entry)
    p = k.c.image.topics["solo"].partitions[0]
    assert (p.leader, p.isr, p.directories) == (1, (1,), (b1,))
