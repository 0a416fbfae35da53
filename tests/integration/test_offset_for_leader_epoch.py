"""OffsetForLeaderEpoch over the wire: every version, every error, a log written by hand under
later leader epochs than the controller's, and the answers after a restart (the epoch history is
on disk).

A single broker leads every partition at epoch 0, the controller's. A log holding later epochs is
made by appending to a stopped broker's partition directory with the storage engine directly: the
broker cuts those records when it takes the leadership and leads at the controller's epoch
(multi-epoch histories are covered by tests/unit/test_partition_epochs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.raw import Raw

from protocol.errors import ErrorCode as E
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import PartitionLog

UNDEFINED = (0, -1, -1)  # no error, epoch -1, end offset -1
VERSIONS = range(0, 5)


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def create(raw: Raw, topic: str, partitions: int) -> None:
    resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(name=topic, num_partitions=partitions,
                                                                  replication_factor=1)]), 5)
    assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp


def batch(n: int) -> bytes:
    return build_batch(Record(i, 0, None, b"v%d" % i) for i in range(n))


def produce(raw: Raw, topic: str, partition: int, n: int) -> None:
    resp = raw.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=batch(n))])]), 9)
    assert isinstance(resp, ProduceResponse) and resp.responses[0].partition_responses[0].error_code == 0, resp


def ask(raw: Raw, topic: str, queries: list[tuple[int, int, int]], version: int = 4,
        replica_id: int = -1) -> list[tuple[int, int, int]]:
    """(partition, current leader epoch, leader epoch) -> (error, epoch, end offset), in order."""
    req = OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[OffsetForLeaderTopic(topic=topic, partitions=[
        OffsetForLeaderPartition(partition=p, current_leader_epoch=cur, leader_epoch=e) for p, cur, e in queries])])
    resp = raw.request(req, version)
    assert isinstance(resp, OffsetForLeaderEpochResponse)
    assert [t.topic for t in resp.topics] == [topic]
    parts = resp.topics[0].partitions
    assert [p.partition for p in parts] == [p for p, _, _ in queries]
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in parts]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topic_at_leader_epoch_0(conn: Raw, version: int) -> None:
    topic = unique_topic(f"ofle-v{version}")
    create(conn, topic, 2)
    produce(conn, topic, 0, 5)
    produce(conn, topic, 0, 2)
    got = ask(conn, topic, [(0, -1, 0), (1, -1, 0), (0, -1, 1), (0, -1, -1), (9, -1, 0)], version)
    # v0 has no epoch in the answer: it decodes as the default, -1
    e0 = 0 if version >= 1 else -1
    assert got == [
        (0, e0, 7),  # the current epoch ends at the log end
        (0, e0, 0),  # ... also in an empty partition
        UNDEFINED,  # an epoch after the current one
        UNDEFINED,  # the undefined epoch
        (E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]
    unknown = ask(conn, unique_topic("nope"), [(0, -1, 0)], version)
    assert unknown == [(E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


@pytest.mark.parametrize("version", range(2, 5))
def test_current_leader_epoch_fences_stale_and_future_clients(conn: Raw, version: int) -> None:
    topic = unique_topic(f"ofle-fence-v{version}")
    create(conn, topic, 1)
    produce(conn, topic, 0, 3)
    assert ask(conn, topic, [(0, 0, 0), (0, 1, 0), (0, -2, 0)], version) == [
        (0, 0, 3),
        (E.UNKNOWN_LEADER_EPOCH, -1, -1),  # the client has seen a newer leader than this one
        (E.FENCED_LEADER_EPOCH, -1, -1),  # only -1 means "no epoch given"; anything older is fenced
    ]
    # v0-1 carry no current epoch: nothing is checked
    assert ask(conn, topic, [(0, 1, 0)], 1) == [(0, 0, 3)]


@pytest.mark.parametrize("replica_id", [-1, -2, 1])
def test_replica_id_does_not_change_the_answer(conn: Raw, replica_id: int) -> None:
    topic = unique_topic("ofle-replica")
    create(conn, topic, 1)
    produce(conn, topic, 0, 4)
    assert ask(conn, topic, [(0, 0, 0)], 3, replica_id) == [(0, 0, 4)]
    assert ask(conn, topic, [(0, 0, 0)], 4, replica_id) == [(0, 0, 4)]


def _leader_epoch(raw: Raw, topic: str) -> int:
    md = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 9)
    assert isinstance(md, MetadataResponse)
    return md.topics[0].partitions[0].leader_epoch


@pytest.fixture
def own_broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory(env={"KETCH_FLUSH_MESSAGES": "1"})


def test_records_of_later_epochs_than_the_controllers_are_cut(own_broker: BrokerProcess) -> None:
    """A history the controller never gave the partition (epochs above the one it assigned, here
    written by hand) is cut when the broker takes the leadership, and the broker leads at the
    controller's epoch. Before, it led at the log's latest epoch, above the controller's: in a
    cluster its followers, fetching with the controller's epoch, were fenced for good."""
    topic, plain = unique_topic("ofle-history"), unique_topic("ofle-plain")
    raw = Raw(own_broker.port)
    create(raw, topic, 1)
    create(raw, plain, 1)
    produce(raw, topic, 0, 3)  # epoch 0: offsets 0-2
    produce(raw, plain, 0, 4)
    raw.close()
    own_broker.stop()
    # epochs 2 (offsets 3-4) and 5 (offsets 5-8), never given by this cluster's controller
    log = PartitionLog.open(Path(own_broker.data_dir) / f"{topic}-0", LogConfig())
    log.append(batch(2), leader_epoch=2)
    log.append(batch(4), leader_epoch=5)
    log.close()
    own_broker.start()

    def check(raw: Raw, end: int) -> None:
        # The broker leads at the controller's epoch: 0, and after the SIGKILL below a newer one (a
        # leader back from an unclean shutdown leads under a new epoch, KIP-966). Epoch 0 then ends
        # where the new one starts; epochs between never led here answer with epoch 0 too.
        cur = _leader_epoch(raw, topic)
        assert (cur > 0) == restarted_unclean
        expected = [(0, 0, end if cur == 0 else 4)] + [(0, 0, 4)] * (cur - 1 if cur > 0 else 0)
        expected += ([(0, cur, end)] if cur > 0 else []) + [UNDEFINED] * 3
        assert ask(raw, topic, [(0, cur, e) for e in range(cur + 4)]) == expected
        assert ask(raw, topic, [(0, cur + 5, 0)]) == [(E.UNKNOWN_LEADER_EPOCH, -1, -1)]
        assert ask(raw, plain, [(0, -1, 0)]) == [(0, 0, 4)]

    restarted_unclean = False
    raw = Raw(own_broker.port)
    try:
        check(raw, 3)
        produce(raw, topic, 0, 1)  # appended under epoch 0
        check(raw, 4)
    finally:
        raw.close()
    own_broker.restart(kill=True)
    restarted_unclean = True
    raw = Raw(own_broker.port)
    try:
        check(raw, 4)
    finally:
        raw.close()
    own_broker.restart()
    raw = Raw(own_broker.port)
    try:
        check(raw, 4)
    finally:
        raw.close()
