"""KIP-966's eligible leader replicas in the controller (broker/controller/partition_change.py):
who joins and leaves the ELR, election from it once the ISR is empty, the last known leader, and
the records that carry them (PartitionChangeRecord v2)."""

from __future__ import annotations

import uuid

import pytest

from broker.controller.quorum_controller import QuorumController
from broker.metadata.image import MetadataImage
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import PartitionChangeRecord, unframe_batch

LISTENERS = [("PLAINTEXT", "h", 9092), ("BROKER", "h", 9093)]


def _commit(c: QuorumController, entry: bytes | None) -> None:
    assert entry is not None
    c.metadata.replay_all(c.image.offset + 1, unframe_batch(entry))


def _cluster(n: int) -> QuorumController:
    c = QuorumController(session_timeout_ms=1000)
    for node in range(1, n + 1):
        entry, epoch = c.register_broker(node, uuid.uuid4(), LISTENERS, None, 0)
        _commit(c, entry)
        _commit(c, c.heartbeat(node, epoch, c.image.offset, False, False, 0)[1])
    return c


def _shrink(c: QuorumController, isr: list[int]) -> None:
    """The leader's AlterPartition for partition 0 of t."""
    t = c.image.topics["t"]
    p = t.partitions[0]
    e = c.image.broker(p.leader).epoch  # type: ignore[union-attr]
    err, entry = c.alter_partition(p.leader, e, t.topic_id, 0, p.leader_epoch, p.partition_epoch,
                                   [(r, -1) for r in isr])
    assert err == 0
    _commit(c, entry)


def _fence(c: QuorumController, silent: int, now: int) -> None:
    c._heard.update({b.node_id: now - 10 for b in c.image.brokers if b.node_id != silent})
    _commit(c, c.expire(now_ms=now))


def test_a_replica_that_left_an_isr_below_min_isr_leads_when_the_isr_empties() -> None:
    """min.insync.replicas 2 on three replicas: the ISR shrinks to {1, 2} (no ELR: still enough),
    then to {1}, and 2 joins the ELR — it holds everything up to the high watermark, which stopped
    there. Broker 1 is fenced: without the ELR the partition waited for broker 1 (offline); now 2
    leads, as the whole ISR, and 1 is eligible in its turn."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}, assignments=[[1, 2, 3]])[0])
    _shrink(c, [1, 2])
    assert c.image.topics["t"].partitions[0].elr == ()
    _shrink(c, [1])
    p = c.image.topics["t"].partitions[0]
    assert (p.isr, p.elr) == ((1,), (2,))
    _fence(c, silent=1, now=10_000)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.leader_epoch) == (2, (2,), (1,), 1)
    # broker 1 back from an unclean shutdown: its log may be torn, so it is no longer eligible
    entry, _ = c.register_broker(1, uuid.uuid4(), LISTENERS, None, 10_100, previous_broker_epoch=-1)
    _commit(c, entry)
    assert c.image.topics["t"].partitions[0].elr == ()
    # broker 3 catches up and rejoins: the ISR is back at min.insync.replicas
    _shrink(c, [2, 3])
    p = c.image.topics["t"].partitions[0]
    assert (p.isr, p.elr) == ((2, 3), ())


def test_a_clean_shutdown_keeps_a_broker_eligible_and_an_unfenced_one_leads_from_the_elr() -> None:
    c = _cluster(2)
    _commit(c, c.create_topic("t", 1, 2, {"min.insync.replicas": "2"}, assignments=[[1, 2]])[0])
    _shrink(c, [1])
    _fence(c, silent=1, now=10_000)  # 2 leads from the ELR
    _fence(c, silent=2, now=20_000)  # and is fenced in its turn: nobody in the ISR, both eligible
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (1, 2), (2,))
    b1 = c.image.broker(1)
    assert b1 is not None
    entry, epoch = c.register_broker(1, uuid.uuid4(), LISTENERS, None, 20_100, previous_broker_epoch=b1.epoch)
    _commit(c, entry)  # a clean restart: still eligible
    _commit(c, c.heartbeat(1, epoch, c.image.offset, False, False, 20_200)[1])  # unfenced: it leads
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (2,), ())


def test_an_unclean_election_takes_a_live_replica_and_clears_the_elr() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {"min.insync.replicas": "3"}, assignments=[[1, 2, 3]])[0])
    _shrink(c, [1, 2])  # 3 joins the ELR (below 3 in sync)
    assert c.image.topics["t"].partitions[0].elr == (3,)
    _fence(c, silent=3, now=10_000)
    _fence(c, silent=1, now=20_000)  # 2 leads: it is in the ISR
    _fence(c, silent=2, now=30_000)  # nobody live is in the ISR or the ELR
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (-1, ())
    e3 = c.image.broker(3).epoch  # type: ignore[union-attr]
    entry, new3 = c.register_broker(3, uuid.uuid4(), LISTENERS, None, 30_100, previous_broker_epoch=e3 - 1)
    _commit(c, entry)  # 3 unclean: not eligible any more
    _commit(c, c.heartbeat(3, new3, c.image.offset, False, False, 30_200)[1])
    p = c.image.topics["t"].partitions[0]
    assert p.leader == -1 and 3 not in p.elr  # live, but neither in sync nor eligible
    entry, outcome = c.elect_leaders([("t", 0)], unclean=True)
    assert outcome == {("t", 0): ErrorCode.NONE}
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (3, (3,), (), ())


def test_elr_changes_are_partition_change_records_v2_and_survive_a_snapshot() -> None:
    c = _cluster(2)
    _commit(c, c.create_topic("t", 1, 2, {"min.insync.replicas": "2"}, assignments=[[1, 2]])[0])
    t = c.image.topics["t"]
    e1 = c.image.broker(1).epoch  # type: ignore[union-attr]
    err, entry = c.alter_partition(1, e1, t.topic_id, 0, 0, 0, [(1, e1)])
    assert err == 0 and entry is not None and entry[:3] == bytes([1, 5, 2])  # frame v1, type 5, version 2
    record = unframe_batch(entry)[0]
    assert isinstance(record, PartitionChangeRecord) and record.eligible_leader_replicas == [2]
    _commit(c, entry)
    assert MetadataImage.from_snapshot(c.image.to_snapshot()) == c.image
    # every broker refuses an ELR that overlaps the ISR or leaves the replicas
    for bad in ([1], [9]):
        with pytest.raises(ValueError):
            c.image.apply(c.image.offset + 1, PartitionChangeRecord(partition_id=0, topic_id=t.topic_id,
                                                                    eligible_leader_replicas=bad))


def _restart_all_uncleanly(c: QuorumController, order: list[int], now: int) -> dict[int, int]:
    """Every broker crashed (no clean-shutdown marker) and registers again, one after another, on
    a controller that has heard from none of them yet (a new quorum leader); then each is unfenced.
    Returns the new broker epochs."""
    c.reset()
    epochs = {}
    for n in order:
        entry, epochs[n] = c.register_broker(n, uuid.uuid4(), LISTENERS, None, now, previous_broker_epoch=-1)
        _commit(c, entry)
    for n in order:
        _commit(c, c.heartbeat(n, epochs[n], c.image.offset, False, False, now + 100)[1])
    return epochs


def test_every_replica_back_from_an_unclean_shutdown_the_longest_log_leads() -> None:
    """Simulation seed 314: broker 2 leads, ISR {1, 2, 3}, min.insync.replicas 2. Broker 2 loses
    power (its log loses its unflushed tail), 1 and 3 are killed (their logs whole), and all three
    register again on a new controller, 1, then 3, then 2 — each without a clean shutdown. 1 and 3
    leave the ISR to 2, still registered from before and not yet fenced; then 2 leaves it too. 2
    used to lead again as the partition's last known leader, and the followers truncated every
    acknowledged record its torn log lacked to it. 3 (and 2) may each hold more than any replica
    known to be whole: the partition waits until both are back, then the one whose log is the
    longest (last leader epoch, then log end) leads, as the whole ISR."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}, assignments=[[2, 1, 3]])[0])
    t = c.image.topics["t"]
    before = t.partitions[0]
    assert (before.leader, before.isr) == (2, (2, 1, 3))
    epochs = _restart_all_uncleanly(c, [1, 3, 2], now=10_000)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr) == (-1, (), ())
    assert sorted(p.last_known_elr) == [2, 3]  # may hold what no whole replica holds: both asked
    assert c.logs_to_inspect() == {2: [(t.topic_id, 0)], 3: [(t.topic_id, 0)]}
    # broker 2's torn log ends at 245, broker 3's at 608 (both last written in leader epoch 0)
    entry = c.recover({2: (epochs[2], {(t.topic_id, 0): (0, 245)}), 3: (epochs[3], {(t.topic_id, 0): (0, 608)})})
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (3, (3,), (), (2,))  # 2 a candidate until in sync
    assert p.leader_epoch > before.leader_epoch
    assert c.logs_to_inspect() == {}
    _commit(c, c.alter_partition(3, epochs[3], t.topic_id, 0, p.leader_epoch, p.partition_epoch,
                                 [(3, epochs[3]), (1, epochs[1])])[1])
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (3, (3, 1), (), ())


def test_a_recovery_election_waits_for_every_candidate_answering_in_its_current_registration() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {"min.insync.replicas": "2"}, assignments=[[2, 1, 3]])[0])
    t = c.image.topics["t"]
    epochs = _restart_all_uncleanly(c, [1, 3, 2], now=10_000)
    tp = (t.topic_id, 0)
    assert c.recover({3: (epochs[3], {tp: (0, 608)})}) is None  # 2 has not answered
    assert c.recover({2: (epochs[2] - 1, {tp: (0, 245)}), 3: (epochs[3], {tp: (0, 608)})}) is None  # a stale 2
    # a candidate that is down again is waited for: nothing to ask until it is back
    c._heard.update({1: 20_000, 3: 20_000})
    _commit(c, c.expire(now_ms=20_500))
    assert c.image.broker(2).fenced  # type: ignore[union-attr]
    assert c.logs_to_inspect() == {}
    assert c.recover({2: (epochs[2], {tp: (0, 245)}), 3: (epochs[3], {tp: (0, 608)})}) is None
    assert c.image.topics["t"].partitions[0].leader == -1
    # a higher last leader epoch wins over a longer log
    _commit(c, c.heartbeat(2, epochs[2], c.image.offset, False, False, 20_600)[1])
    _commit(c, c.recover({2: (epochs[2], {tp: (1, 300)}), 3: (epochs[3], {tp: (0, 608)})}))
    assert c.image.topics["t"].partitions[0].leader == 2
