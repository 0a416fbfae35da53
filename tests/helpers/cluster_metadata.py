"""What a cluster test asks brokers about topics: Metadata as each broker answers it, and
CreateTopics (issue 13's topics in the metadata log)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

from .cluster import Cluster
from .raw import Raw

_RETRIABLE_CREATE = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.INVALID_REPLICATION_FACTOR)


@dataclass(frozen=True)
class Layout:
    brokers: tuple[int, ...]
    partitions: tuple[tuple[int, int, tuple[int, ...], tuple[int, ...]], ...]  # (error, leader, replicas, isr)


def metadata(port: int, topic: str | None) -> tuple[tuple[int, ...], dict[str, Layout]] | None:
    try:
        raw = Raw(port)
    except OSError:
        return None
    try:
        topics = None if topic is None else [MetadataRequestTopic(name=topic)]
        resp = raw.request(MetadataRequest(topics=topics, allow_auto_topic_creation=False), 12)
    except (OSError, AssertionError):
        return None
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse)
    brokers = tuple(sorted(b.node_id for b in resp.brokers))
    out = {}
    for t in resp.topics:
        if t.error_code == 0:
            parts = tuple((p.error_code, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
                          for p in sorted(t.partitions, key=lambda p: p.partition_index))
            out[t.name or ""] = Layout(brokers, parts)
    return brokers, out


def create(port: int, name: str, partitions: int, rf: int, timeout: float = 10.0) -> tuple[int, str | None]:
    raw = Raw(port)
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf)], timeout_ms=int(timeout * 1000)), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse)
    return resp.topics[0].error_code, resp.topics[0].error_message


def create_with_configs(port: int, name: str, partitions: int, rf: int, configs: dict[str, str]) -> int:
    raw = Raw(port)
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])], timeout_ms=10000), 7)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse)
    return resp.topics[0].error_code


def agreed(c: Cluster, topic: str, nodes: list[int]) -> Layout | None:
    seen = [metadata(c.ports[n], topic) for n in nodes]
    layouts = {m[1].get(topic) for m in seen if m is not None}
    if len(layouts) != 1 or any(m is None for m in seen):
        return None
    return next(iter(layouts))


def voters_for(size: int) -> str:
    """A `--voters` value naming a free controller port for each of nodes 1..size."""
    from .broker import HOST, free_port
    return ",".join(f"{n}@{HOST}:{free_port()}" for n in range(1, size + 1))


def listed_everywhere(c: Cluster) -> None:
    """Wait until every broker's Metadata lists every broker (registered and unfenced)."""
    ids = tuple(c.node_ids)
    c.wait_until(lambda: all((m := metadata(c.ports[n], None)) and m[0] == ids for n in ids),
                 timeout=30, message=f"every broker lists the {len(ids)} brokers")


def new_topic(c: Cluster, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None,
              on: int = 1) -> Layout:
    """Create a topic through broker `on` and wait until every running broker shows the same layout.

    On a loaded machine a broker can miss its heartbeats and be fenced for a moment, and the
    controller then has too few brokers for `rf` (INVALID_REPLICATION_FACTOR) or answers late
    (REQUEST_TIMED_OUT, after which the topic may exist): those are retried, as a client would."""
    codes: list[int] = []

    def created() -> bool:
        codes.append(create_with_configs(c.ports[on], name, partitions, rf, configs or {}))
        return codes[-1] not in _RETRIABLE_CREATE

    c.wait_until(created, timeout=30, message=f"CreateTopics {name} to be answered for good: {codes}")
    assert codes[-1] == 0 or (codes[-1] == ErrorCode.TOPIC_ALREADY_EXISTS and ErrorCode.REQUEST_TIMED_OUT in codes), \
        f"CreateTopics {name}: errors {codes}"
    found: list[Layout] = []
    c.wait_until(lambda: found.append(x) or True if (x := agreed(c, name, c.running())) else False,
                 timeout=30, message=f"{name} the same on every broker")
    return found[-1]


def find_coordinator(port: int, key: str, key_type: int) -> tuple[int, int]:
    """(error code, node id) as the broker at `port` answers FindCoordinator for `key` (key_type
    0: group, 1: transactional id)."""
    raw = Raw(port)
    try:
        resp = raw.request(FindCoordinatorRequest(key=key, key_type=key_type), 3)
    finally:
        raw.close()
    assert isinstance(resp, FindCoordinatorResponse)
    return resp.error_code, resp.node_id


def coordinator(port: int, key: str, key_type: int) -> int:
    """The node id the broker at `port` names as coordinator of `key`; -1 when it answers an error."""
    error, node = find_coordinator(port, key, key_type)
    return node if error == 0 else -1


def topic_id(port: int, topic: str) -> uuid.UUID:
    """The topic's id as the broker at `port` names it in Metadata (v10+)."""
    raw = Raw(port)
    try:
        resp = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
                           12)
    finally:
        raw.close()
    assert isinstance(resp, MetadataResponse) and resp.topics[0].error_code == 0, resp
    return resp.topics[0].topic_id


def share_coordinator(port: int, group: str, tid: uuid.UUID, partition: int) -> int:
    """The node the broker at `port` names as share coordinator of a share-partition (FindCoordinator
    v6, key type 2, "group:topicId:partition"); -1 when it answers an error or cannot be reached."""
    try:
        raw = Raw(port)
    except OSError:
        return -1
    try:
        resp = raw.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{group}:{tid}:{partition}"]), 6)
    except (OSError, AssertionError):
        return -1
    finally:
        raw.close()
    assert isinstance(resp, FindCoordinatorResponse)
    c = resp.coordinators[0]
    return c.node_id if c.error_code == 0 else -1


# A broker session short enough for a test to see a fence within seconds, with heartbeats often
# enough to keep it: Kafka's default interval (2 s) against a 3-s session left one second of
# slack, and on a loaded machine a broker whose first heartbeat to a newly elected controller came
# later than that was fenced (test_unclean_election_consumers, beside a simulation batch).
SHORT_SESSION = {"KETCH_BROKER_SESSION_TIMEOUT_MS": "3000", "KETCH_BROKER_HEARTBEAT_INTERVAL_MS": "500"}
