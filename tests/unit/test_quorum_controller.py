"""The controller's decisions — producer-id blocks, broker registration, heartbeats and fencing,
topics and partitions, leadership moves, AlterPartition — and the records they become (the
allocator against real brokers: tests/integration/test_producer_id_blocks.py; topics across three
processes: tests/cluster/test_topics.py)."""

from __future__ import annotations

import uuid

import pytest

from broker.controller.quorum_controller import PRODUCER_ID_BLOCK, QuorumController
from broker.metadata.image import MetadataImage
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata_records import (
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    frame,
    frame_batch,
    unframe,
    unframe_batch,
)
from protocol.primitives import DecodeError


def _two_brokers(c: QuorumController) -> tuple[int, int]:
    """Brokers 1 and 2 registered (offsets 0 and 1): their broker epochs."""
    return _register(c, 1, now=0, offset=0), _register(c, 2, now=0, offset=1)


def test_blocks_in_flight_never_overlap_and_commit_in_order() -> None:
    c = QuorumController()
    e1, e2 = _two_brokers(c)
    r1, s1, n1 = c.allocate_producer_ids(1, e1)
    r2, s2, n2 = c.allocate_producer_ids(2, e2)  # before the first committed
    assert (s1, n1, s2, n2) == (0, PRODUCER_ID_BLOCK, PRODUCER_ID_BLOCK, PRODUCER_ID_BLOCK)
    c.metadata.replay_all(5, [unframe(r1)])
    c.metadata.replay_all(6, [unframe(r2)])
    assert (c.image.offset, c.image.next_producer_id) == (6, 2 * PRODUCER_ID_BLOCK)


def test_a_new_leader_starts_from_what_was_committed() -> None:
    c = QuorumController()
    e1, e2 = _two_brokers(c)
    r1, _, _ = c.allocate_producer_ids(1, e1)
    c.metadata.replay_all(3, [unframe(r1)])
    c.allocate_producer_ids(1, e1)  # proposed, then leadership lost before it committed
    c.reset()
    _, start, _ = c.allocate_producer_ids(2, e2)
    assert start == PRODUCER_ID_BLOCK  # the lost proposal's block is handed out again: nobody got it


def test_ids_handed_out_before_the_quorum_stay_taken() -> None:
    c = QuorumController(producer_id_floor=5000)
    e1, _ = _two_brokers(c)
    assert c.allocate_producer_ids(1, e1)[1] == 5000


def test_a_block_only_for_the_brokers_current_registration() -> None:
    """Issue 23 item 13: a request from a broker epoch that is not the current one (a replaced
    process) or from an unregistered broker gets STALE_BROKER_EPOCH, as in Kafka."""
    c = QuorumController()
    e1, _ = _two_brokers(c)
    for broker, epoch in ((1, e1 - 1), (1, -1), (9, e1)):
        with pytest.raises(KafkaError) as e:
            c.allocate_producer_ids(broker, epoch)
        assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
    assert c.allocate_producer_ids(1, e1)[1] == 0  # nothing was handed out to the refused


def test_the_image_refuses_a_block_that_goes_backwards() -> None:
    img = MetadataImage().apply(0, ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    with pytest.raises(ValueError):
        img.apply(1, ProducerIdsRecord(broker_id=2, next_producer_id=1000))


def test_record_framing_is_kafkas() -> None:
    data = frame(ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=3000))
    # frame version 1, record type 15, version 0 (unsigned varints), then the flexible body
    assert data == bytes([1, 15, 0]) + (2).to_bytes(4, "big") + (7).to_bytes(8, "big") + (3000).to_bytes(8, "big") + b"\x00"
    assert unframe(data) == ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=3000)
    for bad in (bytes([2, 15, 0]) + data[3:], bytes([1, 99, 0]), bytes([1, 15, 3]) + data[3:], data + b"\x00"):
        with pytest.raises(DecodeError):
            unframe(bad)


# ---- brokers: registration, heartbeats, fencing -----------------------------------------------------
LISTENERS = [("PLAINTEXT", "h1", 9092), ("BROKER", "h1", 9093)]


def _register(c: QuorumController, node: int, now: int, offset: int) -> int:
    record, epoch = c.register_broker(node, uuid.uuid4(), LISTENERS, None, now)
    c.metadata.replay_all(offset, [unframe(record)])
    return epoch


def test_a_broker_is_unfenced_once_caught_up_and_fenced_when_silent() -> None:
    c = QuorumController(session_timeout_ms=1000)
    epoch = _register(c, 1, now=0, offset=10)
    b = c.image.broker(1)
    assert b is not None and b.fenced and (b.host, b.port, b.inter_broker_port) == ("h1", 9092, 9093)
    error, record, caught_up, fenced, _ = c.heartbeat(1, epoch, metadata_offset=9, want_fence=False,
                                                      want_shut_down=False, now_ms=100)
    assert (error, record, caught_up, fenced) == (0, None, False, True)  # not yet at its registration
    error, record, caught_up, fenced, _ = c.heartbeat(1, epoch, metadata_offset=10, want_fence=False,
                                                      want_shut_down=False, now_ms=200)
    assert error == 0 and record is not None and caught_up and not fenced
    c.metadata.replay_all(11, unframe_batch(record))
    assert c.image.broker(1).fenced is False  # type: ignore[union-attr]
    assert c.expire(now_ms=1100) is None  # heard 900 ms ago
    fence = c.expire(now_ms=1300)
    assert fence is not None
    assert c.expire(now_ms=1400) is None  # already proposed, not proposed twice
    c.metadata.replay_all(12, unframe_batch(fence))
    assert c.image.broker(1).fenced is True  # type: ignore[union-attr]


def test_a_fenced_broker_is_unfenced_only_once_it_has_applied_its_fence() -> None:
    """A broker cut off (or paused) past its session is fenced and its leaderships move in the same
    entry; when it comes back it must have applied that entry before it is unfenced — its
    registration is long behind it, and until then it still believes it leads."""
    c = QuorumController(session_timeout_ms=1000)
    epoch = _register(c, 1, now=0, offset=10)
    c.metadata.replay_all(11, unframe_batch(c.heartbeat(1, epoch, 10, False, False, 100)[1]))  # type: ignore[arg-type]
    fence = c.expire(now_ms=2000)
    assert fence is not None
    c.metadata.replay_all(40, unframe_batch(fence))
    error, record, caught_up, fenced, _ = c.heartbeat(1, epoch, metadata_offset=39, want_fence=False,
                                                      want_shut_down=False, now_ms=2100)
    assert (error, record, caught_up, fenced) == (0, None, False, True)
    error, record, caught_up, fenced, _ = c.heartbeat(1, epoch, metadata_offset=40, want_fence=False,
                                                      want_shut_down=False, now_ms=2200)
    assert error == 0 and record is not None and caught_up and not fenced
    assert MetadataImage.from_snapshot(c.image.to_snapshot()) == c.image


def test_stale_and_unknown_heartbeats_are_refused() -> None:
    c = QuorumController()
    first = _register(c, 1, now=0, offset=0)
    second = _register(c, 1, now=0, offset=1)  # restarted: a new epoch replaces the old
    assert second > first
    assert c.heartbeat(1, first, 5, False, False, 0)[0] == ErrorCode.STALE_BROKER_EPOCH
    assert c.heartbeat(2, 1, 5, False, False, 0)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_a_new_leader_gives_every_broker_a_full_session() -> None:
    c = QuorumController(session_timeout_ms=1000)
    epoch = _register(c, 1, now=0, offset=0)
    c.metadata.replay_all(1, unframe_batch(c.heartbeat(1, epoch, 0, False, False, 0)[1]))  # type: ignore[arg-type]
    c.reset()  # leadership moved here at t=5000: nobody was heard by this leader yet
    assert c.expire(now_ms=5000) is None and c.expire(now_ms=5900) is None
    assert c.expire(now_ms=6100) is not None


def test_broker_records_survive_a_snapshot() -> None:
    c = QuorumController()
    _register(c, 3, now=0, offset=4)
    assert MetadataImage.from_snapshot(c.image.to_snapshot()) == c.image


def test_a_metadata_record_the_broker_cannot_read_is_skipped_whole(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An unknown record type, an unknown version, or a record that contradicts the image: logged,
    not applied, and the image stays what it was (never half-applied, never a crash)."""
    from broker.config import BrokerConfig  # noqa: PLC0415
    from broker.quorum.messages import Entry  # noqa: PLC0415
    from broker.server import BrokerServer  # noqa: PLC0415

    server = BrokerServer(BrokerConfig(data_dir=str(tmp_path)))
    good = frame(ProducerIdsRecord(broker_id=1, next_producer_id=1000))
    server.metadata.on_commit(Entry(0, 1, good))
    before = server.controller.image
    for bad in (bytes([1, 99, 0, 0]), bytes([1, 15, 7]) + good[3:], good, b"\xff"):
        server.metadata.on_commit(Entry(1, 1, bad))  # `good` again goes backwards: refused by the image
    assert server.controller.image == before
    # a topic whose second partition record is out of order: the topic is not created at all
    tid = uuid.uuid4()
    half = frame_batch([frame(TopicRecord(name="half", topic_id=tid)),
                        frame(PartitionRecord(partition_id=0, topic_id=tid, replicas=[1], isr=[1], leader=1)),
                        frame(PartitionRecord(partition_id=5, topic_id=tid, replicas=[1], isr=[1], leader=1))])
    server.metadata.on_commit(Entry(2, 1, half))
    assert server.controller.image == before and "half" not in server.topics.by_name
    assert not (tmp_path / "half-0").exists()
    out = capsys.readouterr()
    assert (out.out + out.err).count("metadata entry not applied") == 5


# ---- topics, partitions, leadership --------------------------------------------------------------
def _cluster(n: int = 3) -> QuorumController:
    """A controller whose image has brokers 1..n registered and unfenced."""
    c = QuorumController(session_timeout_ms=1000)
    offset = 0
    for node in range(1, n + 1):
        epoch = _register(c, node, now=0, offset=offset)
        entry = c.heartbeat(node, epoch, offset, False, False, 0)[1]
        assert entry is not None
        c.metadata.replay_all(offset + 1, unframe_batch(entry))
        offset += 2
    return c


def _unchecked(ids: list[int]) -> list[tuple[int, int]]:
    """ISR members without their broker epochs (-1), as AlterPartition before v3 names them."""
    return [(r, -1) for r in ids]


def _commit(c: QuorumController, entry: bytes | None) -> None:
    assert entry is not None
    c.metadata.replay_all(c.image.offset + 1, unframe_batch(entry))


def test_replicas_are_striped_over_live_brokers_and_the_first_leads() -> None:
    c = _cluster(3)
    entry, topic_id = c.create_topic("t", 6, 2, {"retention.ms": "1000"})
    _commit(c, entry)
    t = c.image.topics["t"]
    assert t.topic_id == topic_id and dict(t.configs) == {"retention.ms": "1000"}
    assert [p.leader for p in t.partitions] == [p.replicas[0] for p in t.partitions]
    assert {p.leader for p in t.partitions} == {1, 2, 3}
    assert all(len(set(p.replicas)) == 2 and p.isr == p.replicas and p.leader_epoch == 0 for p in t.partitions)
    with pytest.raises(KafkaError) as e:
        c.create_topic("t", 1, 1, {})
    assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as e:
        c.create_topic("u", 1, 4, {})
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 3 broker(s)" in e.value.message
    with pytest.raises(KafkaError) as e:
        c.create_topic("u", 1, 1, {}, assignments=[[1, 9]])
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_a_topic_and_its_partitions_are_one_entry_applied_whole_or_not_at_all() -> None:
    c = _cluster(1)
    entry, _ = c.create_topic("t", 3, 1, {"segment.bytes": "4096"})
    records = unframe_batch(entry)
    assert [type(r).__name__ for r in records] == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 3
    before = c.image
    with pytest.raises(ValueError):  # the last record names a partition out of order: nothing applies
        c.metadata.replay_all(100, records[:-2] + records[-1:])
    assert c.image == before and "t" not in c.image.topics


def test_fencing_moves_leadership_to_the_isr_or_leaves_the_partition_leaderless() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 3, 3, {}, assignments=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])[0])
    # partition 0's ISR grows to {1, 2} through its leader's AlterPartition
    t = c.image.topics["t"]
    b1 = c.image.broker(1)
    assert b1 is not None
    err, entry = c.alter_partition(1, b1.epoch, t.topic_id, 0, 0, 0, _unchecked([1, 2]))
    assert err == 0
    _commit(c, entry)
    c._heard.update({2: 10_000, 3: 10_000})  # broker 1 silent since 0
    _commit(c, c.expire(now_ms=10_500))
    t = c.image.topics["t"]
    assert c.image.broker(1).fenced  # type: ignore[union-attr]
    assert (t.partitions[0].leader, t.partitions[0].isr, t.partitions[0].leader_epoch) == (2, (2,), 1)
    assert [p.leader for p in t.partitions[1:]] == [2, 3]  # untouched
    # broker 2 fenced too: partition 0 has nobody left in its ISR, broker 2 is its eligible leader
    # replica (KIP-966: the ISR was below min.insync.replicas when it left), and it has no leader
    c._heard.update({3: 20_000})
    _commit(c, c.expire(now_ms=20_500))
    p0 = c.image.topics["t"].partitions[0]
    assert (p0.leader, p0.isr, p0.elr, p0.last_known_elr) == (-1, (), (2,), (2,))
    # broker 2 comes back (heartbeats, caught up): unfencing re-elects it for partition 0
    b2 = c.image.broker(2)
    assert b2 is not None
    _commit(c, c.heartbeat(2, b2.epoch, c.image.offset, False, False, 21_000)[1])
    p0 = c.image.topics["t"].partitions[0]
    assert p0.leader == 2 and p0.leader_epoch == 3


def test_a_restarted_broker_registering_again_gives_up_what_others_can_lead() -> None:
    """Its log may have lost a torn tail: partitions with another in-sync replica move there (a new
    leader epoch) and it leaves their ISRs; a partition only it can lead waits for it, leaderless."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 2, 3, {}, assignments=[[1, 2, 3], [1, 2, 3]])[0])
    t = c.image.topics["t"]
    b1 = c.image.broker(1)
    assert b1 is not None
    err, entry = c.alter_partition(1, b1.epoch, t.topic_id, 0, 0, 0, _unchecked([1, 2, 3]))
    assert err == 0
    _commit(c, entry)
    err, entry = c.alter_partition(1, b1.epoch, t.topic_id, 1, 0, 0, _unchecked([1]))
    assert err == 0
    _commit(c, entry)
    entry, epoch = c.register_broker(1, uuid.uuid4(), LISTENERS, None, 30_000)  # back before its session ended
    _commit(c, entry)
    p0, p1 = c.image.topics["t"].partitions
    assert c.image.broker(1).fenced and c.image.broker(1).epoch == epoch  # type: ignore[union-attr]
    assert (p0.leader, sorted(p0.isr), p0.leader_epoch) == (2, [2, 3], 1)
    assert (p1.leader, p1.isr, p1.last_known_elr, p1.leader_epoch) == (-1, (), (1,), 1)


def test_a_sole_isr_leader_back_from_an_unclean_shutdown_leads_under_a_new_epoch() -> None:
    """Issue 23 item 2: B (broker 2) leads alone (C, broker 3, left the ISR), is killed with its log's
    tail torn and registers again within its session. Kept at its old leader epoch, it took new
    records at offsets C still held under that epoch, and C, back, saw no divergence: two histories
    under one epoch. Registered without a clean-shutdown epoch, it gives up the leadership (the
    partition waits for it) and leads again, once unfenced, under a new epoch."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 2, {}, assignments=[[2, 3]])[0])
    t = c.image.topics["t"]
    e2 = c.image.broker(2).epoch  # type: ignore[union-attr]
    _commit(c, c.alter_partition(2, e2, t.topic_id, 0, 0, 0, _unchecked([2]))[1])  # C fell behind
    before = c.image.topics["t"].partitions[0]
    entry, epoch = c.register_broker(2, uuid.uuid4(), LISTENERS, None, 1_000, previous_broker_epoch=-1)
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    # not an eligible leader replica (its log may be torn), but the leader the ISR had last
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (), (2,)) and p.leader_epoch > before.leader_epoch
    _commit(c, c.heartbeat(2, epoch, c.image.offset, False, False, 1_100)[1])  # caught up: unfenced
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, (2,)) and p.leader_epoch >= before.leader_epoch + 2


def test_a_broker_back_from_a_clean_shutdown_keeps_what_only_it_can_lead() -> None:
    """A clean shutdown (its broker epoch given back as PreviousBrokerEpoch) flushed the log: nothing
    was lost, and a partition only it can lead keeps its leader and epoch."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 2, {}, assignments=[[2, 3]])[0])
    t = c.image.topics["t"]
    e2 = c.image.broker(2).epoch  # type: ignore[union-attr]
    _commit(c, c.alter_partition(2, e2, t.topic_id, 0, 0, 0, _unchecked([2]))[1])
    entry, _ = c.register_broker(2, uuid.uuid4(), LISTENERS, None, 1_000, previous_broker_epoch=e2)
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch) == (2, (2,), 0)
    # a PreviousBrokerEpoch that is not the broker's current one is an unclean shutdown
    entry, _ = c.register_broker(2, uuid.uuid4(), LISTENERS, None, 2_000, previous_broker_epoch=e2)
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch) == (-1, 1)


def _decided_on_one_image(c: QuorumController, first: bytes | None, second: bytes | None) -> None:
    """Commit two entries that were both decided on the same image; the second may be refused."""
    _commit(c, first)
    try:
        _commit(c, second)
    except ValueError:
        pass  # refused whole: the image is what the first entry made it


def test_a_change_decided_on_an_older_partition_epoch_is_refused() -> None:
    """Issue 23 item 1: broker 1 (D) fenced, leadership to broker 2 (B), and B's re-registration
    (B leaves the ISR) both decided on one image. Applied in turn they made leader B, ISR {D}: a
    restarted broker with a torn log leading outside the ISR. The second is refused instead."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 2, {}, assignments=[[1, 2]])[0])
    assert c.image.topics["t"].partitions[0].isr == (1, 2)
    c._heard.update({2: 10_000, 3: 10_000})  # broker 1 silent since 0
    fence = c.expire(now_ms=10_500)
    again, _ = c.register_broker(2, uuid.uuid4(), LISTENERS, None, 10_500)  # on the same image
    _decided_on_one_image(c, fence, again)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, (2,))
    # the same with three replicas: C's re-registration (C leaves, {D, B}) after D's fence ({B, C}) would
    # bring the fenced D back into the ISR
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {}, assignments=[[1, 2, 3]])[0])
    c._heard.update({2: 10_000, 3: 10_000})
    fence = c.expire(now_ms=10_500)
    again, _ = c.register_broker(3, uuid.uuid4(), LISTENERS, None, 10_500)
    _decided_on_one_image(c, fence, again)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, (2, 3))


def test_controlled_shutdown_moves_leadership_first_then_lets_the_broker_go() -> None:
    c = _cluster(2)
    _commit(c, c.create_topic("t", 1, 2, {}, assignments=[[1, 2]])[0])
    t = c.image.topics["t"]
    b1 = c.image.broker(1)
    assert b1 is not None
    _commit(c, c.alter_partition(1, b1.epoch, t.topic_id, 0, 0, 0, _unchecked([1, 2]))[1])
    error, entry, _, _, may_stop = c.heartbeat(1, b1.epoch, c.image.offset, False, True, 0)
    assert error == 0 and not may_stop
    _commit(c, entry)
    assert c.image.broker(1).in_controlled_shutdown  # type: ignore[union-attr]
    assert c.image.topics["t"].partitions[0].leader == 2
    assert c.heartbeat(1, b1.epoch, c.image.offset, False, True, 0)[4] is True  # leads nothing: may stop
    with pytest.raises(KafkaError):  # nor is it given new partitions
        c.create_topic("u", 1, 2, {})


def test_alter_partition_is_checked_in_kafkas_order() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {}, assignments=[[1, 2, 3]])[0])
    tid = c.image.topics["t"].topic_id
    e1 = c.image.broker(1).epoch  # type: ignore[union-attr]
    e2 = c.image.broker(2).epoch  # type: ignore[union-attr]
    assert c.alter_partition(1, e1 + 100, tid, 0, 0, 0, _unchecked([1, 2]))[0] == ErrorCode.STALE_BROKER_EPOCH
    assert c.alter_partition(1, e1, uuid.uuid4(), 0, 0, 0, _unchecked([1, 2]))[0] == ErrorCode.UNKNOWN_TOPIC_ID
    assert c.alter_partition(1, e1, tid, 5, 0, 0, _unchecked([1, 2]))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.alter_partition(2, e2, tid, 0, 0, 0, _unchecked([1, 2]))[0] == ErrorCode.INVALID_REQUEST  # not the leader
    assert c.alter_partition(1, e1, tid, 0, 1, 0, _unchecked([1, 2]))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert c.alter_partition(1, e1, tid, 0, 0, 7, _unchecked([1, 2]))[0] == ErrorCode.INVALID_UPDATE_VERSION
    err, entry = c.alter_partition(1, e1, tid, 0, 0, 0, _unchecked([1]))  # every replica was in sync at creation
    assert err == 0
    _commit(c, entry)
    c._heard.update({1: 10_000, 3: 10_000})
    _commit(c, c.expire(now_ms=10_500))  # broker 2 fenced: it may not join the ISR
    assert c.alter_partition(1, e1, tid, 0, 0, 1, _unchecked([1, 2]))[0] == ErrorCode.INELIGIBLE_REPLICA
    err, entry = c.alter_partition(1, e1, tid, 0, 0, 1, _unchecked([1, 3]))
    assert err == 0
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((1, 3), 0, 2)  # an ISR change keeps the leader epoch


def test_alter_partition_refuses_a_member_of_another_broker_epoch() -> None:
    """KIP-903: the leader saw broker 2 catch up, and its AlterPartition adding broker 2 arrives after
    broker 2 crashed and registered again (a new broker epoch, its log possibly torn): refused."""
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 3, {}, assignments=[[1, 2, 3]])[0])
    tid = c.image.topics["t"].topic_id
    e1 = c.image.broker(1).epoch  # type: ignore[union-attr]
    old2 = c.image.broker(2).epoch  # type: ignore[union-attr]
    _commit(c, c.alter_partition(1, e1, tid, 0, 0, 0, [(1, e1)])[1])
    entry, new2 = c.register_broker(2, uuid.uuid4(), LISTENERS, None, 1_000)
    _commit(c, entry)
    _commit(c, c.heartbeat(2, new2, c.image.offset, False, False, 1_100)[1])  # unfenced: live again
    assert c.alter_partition(1, e1, tid, 0, 0, 1, [(1, e1), (2, old2)])[0] == ErrorCode.INELIGIBLE_REPLICA
    assert c.alter_partition(1, e1, tid, 0, 0, 1, [(1, e1 + 7), (2, new2)])[0] == ErrorCode.INELIGIBLE_REPLICA
    err, entry = c.alter_partition(1, e1, tid, 0, 0, 1, [(1, e1), (2, new2), (3, -1)])  # -1: not checked
    assert err == 0
    _commit(c, entry)
    assert c.image.topics["t"].partitions[0].isr == (1, 2, 3)


def test_topic_records_survive_a_snapshot_and_delete_removes_them() -> None:
    c = _cluster(2)
    _commit(c, c.create_topic("t", 2, 2, {"retention.ms": "5"})[0])
    _commit(c, c.set_configs("t", {"segment.bytes": "4096"}))
    assert dict(c.image.topics["t"].configs) == {"segment.bytes": "4096"}
    _commit(c, c.create_partitions("t", 3, None))
    assert MetadataImage.from_snapshot(c.image.to_snapshot()) == c.image
    _commit(c, c.delete_topic("t")[0])
    assert "t" not in c.image.topics


def test_partition_records_are_framed_as_kafkas_json_says() -> None:
    """PartitionChangeRecord v0: PartitionId, TopicId, then only the changed fields as tagged fields
    (Leader is tag 1); PartitionRecord v0: its fields in order, LeaderRecoveryState tagged (tag 0)."""
    import struct

    from protocol.messages.metadata_records import PartitionChangeRecord

    tid = uuid.UUID(int=5)
    change = frame(PartitionChangeRecord(partition_id=1, topic_id=tid, leader=2))
    assert change == bytes([1, 5, 0]) + struct.pack(">i", 1) + tid.bytes + bytes([1, 1, 4]) + struct.pack(">i", 2)
    record = frame(PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2], isr=[1], leader=1,
                                   leader_epoch=0, partition_epoch=0))
    assert record == (bytes([1, 3, 0]) + struct.pack(">i", 0) + tid.bytes + b"\x03" + struct.pack(">ii", 1, 2)
                      + b"\x02" + struct.pack(">i", 1) + b"\x01" + b"\x01" + struct.pack(">iii", 1, 0, 0) + b"\x00")
    assert unframe(change) == PartitionChangeRecord(partition_id=1, topic_id=tid, leader=2)


def test_elect_leaders_preferred_and_unclean() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 2, 3, {}, assignments=[[1, 2, 3], [2, 3, 1]])[0])
    # broker 1 fenced: partition 0 moves to 2 (in sync); partition 1 untouched
    c._heard.update({2: 10_000, 3: 10_000})
    _commit(c, c.expire(now_ms=10_500))
    assert [p.leader for p in c.image.topics["t"].partitions] == [2, 2]
    entry, outcome = c.elect_leaders([("t", 0), ("t", 1), ("nope", 0)], unclean=False)
    assert entry is None and outcome == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # 1 is fenced
                                         ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                                         ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # broker 1 back and in sync again: the periodic rebalance returns partition 0 to it
    b1 = c.image.broker(1)
    assert b1 is not None
    _commit(c, c.heartbeat(1, b1.epoch, c.image.offset, False, False, 11_000)[1])
    t = c.image.topics["t"]
    b2 = c.image.broker(2)
    assert b2 is not None
    _commit(c, c.alter_partition(2, b2.epoch, t.topic_id, 0, 1, t.partitions[0].partition_epoch, _unchecked([2, 3, 1]))[1])
    _commit(c, c.rebalance_leaders())
    p0 = c.image.topics["t"].partitions[0]
    assert (p0.leader, p0.leader_epoch) == (1, 2)
    assert c.rebalance_leaders() is None  # nothing left to move


def test_unclean_election_only_where_the_topic_allows_it() -> None:
    c = _cluster(2)
    _commit(c, c.create_topic("safe", 1, 2, {}, assignments=[[1, 2]])[0])
    _commit(c, c.create_topic("lossy", 1, 2, {"unclean.leader.election.enable": "true"}, assignments=[[1, 2]])[0])
    e1 = c.image.broker(1).epoch  # type: ignore[union-attr]
    for name in ("safe", "lossy"):  # broker 2 fell behind: the ISR is broker 1 alone
        t = c.image.topics[name]
        _commit(c, c.alter_partition(1, e1, t.topic_id, 0, 0, 0, _unchecked([1]))[1])
    c._heard.update({2: 10_000})
    _commit(c, c.expire(now_ms=10_500))  # broker 1, the only in-sync replica, is fenced
    safe, lossy = c.image.topics["safe"].partitions[0], c.image.topics["lossy"].partitions[0]
    assert (safe.leader, safe.isr, safe.elr) == (-1, (), (1,))  # waits for broker 1
    assert (lossy.leader, lossy.isr) == (2, (2,))  # takes broker 2 and what it has
    _, outcome = c.elect_leaders([("safe", 0)], unclean=True)  # an operator's unclean election
    assert outcome == {("safe", 0): ErrorCode.NONE}


def test_a_reassignment_adds_first_and_drops_the_old_replicas_once_the_new_are_in_sync() -> None:
    c = _cluster(4)
    _commit(c, c.create_topic("t", 1, 2, {}, assignments=[[1, 2]])[0])
    entry, outcome = c.reassign([("t", 0, [3, 4]), ("t", 9, [1]), ("nope", 0, [1])])
    assert outcome == {("t", 0): (ErrorCode.NONE, None),
                       ("t", 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "t-9 does not exist"),
                       ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "nope-0 does not exist")}
    _commit(c, entry)
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding, p.removing, p.leader) == ((3, 4, 1, 2), (3, 4), (1, 2), 1)
    assert c.complete_reassignments() is None  # 3 and 4 are not in sync yet
    t = c.image.topics["t"]
    e1 = c.image.broker(1).epoch  # type: ignore[union-attr]
    _commit(c, c.alter_partition(1, e1, t.topic_id, 0, 0, p.partition_epoch, _unchecked([1, 2, 3]))[1])
    assert c.complete_reassignments() is None  # 4 still catching up
    p = c.image.topics["t"].partitions[0]
    _commit(c, c.alter_partition(1, e1, t.topic_id, 0, 0, p.partition_epoch, _unchecked([1, 2, 3, 4]))[1])
    _commit(c, c.complete_reassignments())
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.isr, p.adding, p.removing, p.leader, p.leader_epoch) == ((3, 4), (3, 4), (), (), 3, 1)
    assert c.reassign([("t", 0, [3, 3])])[1][("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_a_reassignment_can_be_cancelled_and_a_bad_target_is_refused() -> None:
    c = _cluster(3)
    _commit(c, c.create_topic("t", 1, 1, {}, assignments=[[1]])[0])
    assert c.reassign([("t", 0, None)])[1][("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert c.reassign([("t", 0, [7])])[1][("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert c.reassign([("t", 0, [1])]) == (None, {("t", 0): (ErrorCode.NONE, None)})  # already so
    _commit(c, c.reassign([("t", 0, [2])])[0])
    assert c.image.topics["t"].partitions[0].adding == (2,)
    _commit(c, c.reassign([("t", 0, None)])[0])
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding, p.removing, p.leader) == ((1,), (), (), 1)


def test_a_topic_change_of_more_than_kafkas_10000_records_is_refused_as_kafka_refuses_it() -> None:
    """Found by the fuzzer: a CreateTopics of tens of thousands of partitions became one entry that
    every broker decoded, applied and opened logs for on its event loop (the broker stuck for
    more than the probe's 15 s). Kafka's controller refuses a user operation of more than
    MAX_RECORDS_PER_USER_OP (10,000) records: POLICY_VIOLATION, "Unable to perform excessively
    large batch operation." (its BoundedListTooLongException)."""
    c = _cluster(1)
    for make in (lambda: c.create_topic("big", 10_000, 1, {}),  # + the TopicRecord: 10,001
                 lambda: c.create_topic("big", 9_999, 1, {"retention.ms": "1"}),
                 lambda: c.create_topic("big", 0, 1, {}, assignments=[[1]] * 10_000)):
        with pytest.raises(KafkaError) as e:
            make()
        assert e.value.code == ErrorCode.POLICY_VIOLATION
        assert e.value.message == "Unable to perform excessively large batch operation."
    entry, _ = c.create_topic("big", 9_999, 1, {})
    _commit(c, entry)
    with pytest.raises(KafkaError) as e:
        c.create_partitions("big", 9_999 + 10_001, None)
    assert e.value.code == ErrorCode.POLICY_VIOLATION
    _commit(c, c.create_partitions("big", 9_999 + 10_000, None))
    assert len(c.image.topics["big"].partitions) == 19_999
