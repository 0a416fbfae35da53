"""OffsetDelete over the wire: Kafka's rules for which offsets go, every error, and tombstones that
keep deleted offsets deleted across a SIGKILL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.raw import Raw

from client.assignors import Subscription, encode_subscription
from protocol.errors import ErrorCode as E
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse

FAST = {"KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KETCH_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
        "KETCH_FLUSH_MESSAGES": "1"}
TP = tuple[str, int]


@pytest.fixture
def raw_broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory(env=FAST)


@pytest.fixture
def raw(raw_broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(raw_broker.port)
    yield r
    r.close()


def create(raw: Raw, *topics: str, partitions: int = 2) -> None:
    resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(name=t, num_partitions=partitions,
                                                                  replication_factor=1) for t in topics]), 5)
    assert isinstance(resp, CreateTopicsResponse) and all(t.error_code == 0 for t in resp.topics), resp


def member(raw: Raw, group: str, metadata: bytes, protocol_type: str = "consumer") -> tuple[str, int]:
    """The only member of `group`, through JoinGroup (v5, with its MEMBER_ID_REQUIRED step) and SyncGroup."""
    def join(member_id: str) -> JoinGroupResponse:
        resp = raw.request(JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=10_000, member_id=member_id,
            protocol_type=protocol_type, protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)]), 5)
        assert isinstance(resp, JoinGroupResponse)
        return resp

    first = join("")
    assert first.error_code == E.MEMBER_ID_REQUIRED
    j = join(first.member_id)
    assert j.error_code == 0, j
    s = raw.request(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                     assignments=[SyncGroupRequestAssignment(member_id=j.member_id,
                                                                             assignment=b"")]), 3)
    assert isinstance(s, SyncGroupResponse) and s.error_code == 0
    return j.member_id, j.generation_id


def commit(raw: Raw, group: str, offsets: dict[TP, int], member_id: str = "", generation: int = -1) -> None:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(OffsetCommitRequestPartition(partition_index=p, committed_offset=o))
    resp = raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()]), 7)
    assert isinstance(resp, OffsetCommitResponse)
    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions), resp


def committed(raw: Raw, group: str, tps: list[TP]) -> dict[TP, int]:
    resp = raw.request(OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequestTopic(name=t, partition_indexes=[p]) for t, p in tps]), 7)
    assert isinstance(resp, OffsetFetchResponse) and resp.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def delete(raw: Raw, group: str, tps: list[TP]) -> tuple[int, list[tuple[str, int, int]]]:
    """(top-level error, [(topic, partition, error)] in the order of the answer)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    resp = raw.request(OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequestTopic(name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in by_topic.items()]), 0)
    assert isinstance(resp, OffsetDeleteResponse)
    assert resp.throttle_time_ms == 0
    return resp.error_code, [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def heartbeat(raw: Raw, group: str, member_id: str, generation: int) -> int:
    resp = raw.request(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id), 3)
    assert isinstance(resp, HeartbeatResponse)
    return resp.error_code


def test_unsubscribed_offsets_go_and_stay_gone_after_sigkill(raw_broker: BrokerProcess, raw: Raw) -> None:
    a, b = unique_topic("od-a"), unique_topic("od-b")
    create(raw, a, b)
    everything = [(a, 0), (a, 1), (b, 0), (b, 1)]
    m, gen = member(raw, "live", encode_subscription(Subscription((a,))))
    commit(raw, "live", dict.fromkeys(everything, 5), m, gen)
    commit(raw, "solo", {(a, 0): 3, (b, 0): 4})  # a group that only stores offsets: Empty

    assert delete(raw, "live", [(a, 0), (b, 0), (b, 1), (b, 7), ("od-none", 0)]) == (0, [
        (a, 0, E.GROUP_SUBSCRIBED_TO_TOPIC),  # a member consumes it: the next commit would be lost
        (b, 0, 0), (b, 1, 0),
        (b, 7, E.UNKNOWN_TOPIC_OR_PARTITION), ("od-none", 0, E.UNKNOWN_TOPIC_OR_PARTITION)])
    assert delete(raw, "solo", [(a, 0), (b, 1)]) == (0, [(a, 0, 0), (b, 1, 0)])  # b-1 had none: fine too
    live = {(a, 0): 5, (a, 1): 5, (b, 0): -1, (b, 1): -1}
    solo = {(a, 0): -1, (a, 1): -1, (b, 0): 4, (b, 1): -1}
    assert committed(raw, "live", everything) == live
    assert committed(raw, "solo", everything) == solo
    assert heartbeat(raw, "live", m, gen) == 0  # the group was not disturbed

    raw.close()
    raw_broker.restart(kill=True)
    r2 = Raw(raw_broker.port)
    try:
        wait_until(lambda: heartbeat(r2, "live", m, gen) != E.COORDINATOR_LOAD_IN_PROGRESS, timeout=20,
                   message="groups loaded")
        assert committed(r2, "live", everything) == live
        assert committed(r2, "solo", everything) == solo
        # the member came back with its subscription: its topic is still protected
        assert delete(r2, "live", [(a, 1)]) == (0, [(a, 1, E.GROUP_SUBSCRIBED_TO_TOPIC)])
    finally:
        r2.close()


def test_group_level_errors_answer_without_topics(raw: Raw) -> None:
    t = unique_topic("od-err")
    create(raw, t)
    assert delete(raw, "", [(t, 0)]) == (E.INVALID_GROUP_ID, [])
    assert delete(raw, "od-ghost", [(t, 0), ("od-none", 0)]) == (E.GROUP_ID_NOT_FOUND, [])
    # members of a protocol other than "consumer": Kafka cannot tell what they use, so refuses all
    member(raw, "connect-group", b"whatever", protocol_type="connect")
    assert delete(raw, "connect-group", [(t, 0)]) == (E.NON_EMPTY_GROUP, [])


def test_unreadable_subscriptions_protect_every_topic(raw: Raw) -> None:
    t = unique_topic("od-unread")
    create(raw, t)
    m, gen = member(raw, "odd-metadata", b"\x00\x01raw")
    commit(raw, "odd-metadata", {(t, 0): 2}, m, gen)
    assert delete(raw, "odd-metadata", [(t, 0), (t, 1)]) == (0, [
        (t, 0, E.GROUP_SUBSCRIBED_TO_TOPIC), (t, 1, E.GROUP_SUBSCRIBED_TO_TOPIC)])
    assert committed(raw, "odd-metadata", [(t, 0)]) == {(t, 0): 2}
