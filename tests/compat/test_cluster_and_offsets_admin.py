"""Real clients on the APIs for cluster description and offset deletion: confluent-kafka's
AdminClient.describe_cluster and list_consumer_group_offsets (it has no offset deletion) and
kafka-python's KafkaAdminClient.describe_cluster and delete_group_offsets. Both clients' consumers
finding a truncated log through OffsetForLeaderEpoch (KIP-320) need a real unclean election:
tests/cluster/test_unclean_election_consumers.py."""

from __future__ import annotations

import warnings

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AclOperation
from helpers import BrokerProcess, unique_topic, wait_until
from helpers.confluent import QUIET, admin
from helpers.raw import Raw

from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

pytestmark = [pytest.mark.compat, pytest.mark.single_broker]  # one broker's DescribeCluster, its files, its port

ENV = {"KETCH_CLUSTER_ID": "compat-cluster", "KETCH_RACK": "rack-1", "KETCH_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
       "KETCH_FLUSH_MESSAGES": "1"}
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return broker_factory(env=ENV)


def create(broker: BrokerProcess, *topics: str, partitions: int = 1) -> None:
    raw = Raw(broker.port)
    try:
        resp = raw.request(CreateTopicsRequest(topics=[CreatableTopic(name=t, num_partitions=partitions,
                                                                      replication_factor=1) for t in topics]), 5)
    finally:
        raw.close()
    assert isinstance(resp, CreateTopicsResponse) and all(t.error_code == 0 for t in resp.topics), resp


# ---- DescribeCluster -------------------------------------------------------------------------------

def test_confluent_describe_cluster(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    d = client.describe_cluster(include_authorized_operations=True, request_timeout=30).result(30)
    assert d.cluster_id == "compat-cluster"
    assert d.controller is not None and d.controller.id == 1
    assert [(n.id, n.host, n.port, n.rack) for n in d.nodes] == [(1, broker.host, broker.port, "rack-1")]
    assert set(d.authorized_operations or []) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
    plain = client.describe_cluster(request_timeout=30).result(30)
    assert plain.cluster_id == "compat-cluster" and not plain.authorized_operations


def test_kafka_python_describe_cluster(broker: BrokerProcess) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        d = client.describe_cluster()
    finally:
        client.close()
    assert (d["cluster_id"], d["controller_id"]) == ("compat-cluster", 1)
    assert [(b["broker_id"], b["host"], b["port"], b["rack"], b["is_fenced"]) for b in d["brokers"]] == [
        (1, broker.host, broker.port, "rack-1", False)]


# ---- OffsetDelete ----------------------------------------------------------------------------------

def test_delete_group_offsets_next_to_a_live_librdkafka_member(broker: BrokerProcess) -> None:
    """kafka-python deletes, confluent-kafka lists; librdkafka's own subscription metadata decides
    which topics the group is still subscribed to."""
    subscribed, other = unique_topic("od-sub"), unique_topic("od-other")
    create(broker, subscribed, other, partitions=2)
    group = unique_topic("od-group")
    everything = [TopicPartition(t, p) for t in (subscribed, other) for p in range(2)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    # offset 0 of the empty partitions: a position the member can fetch from
    c.commit(offsets=[TopicPartition(tp.topic, tp.partition, 0) for tp in everything], asynchronous=False)
    c.subscribe([subscribed])
    wait_until(lambda: c.poll(0.2) is None and len(c.assignment()) == 2, timeout=60, interval=0,
               message="the member to own both partitions of its topic")

    lister = admin(broker.bootstrap)  # kept alive: a dropped AdminClient fails its pending requests

    def committed() -> dict[tuple[str, int], int]:
        req = [ConsumerGroupTopicPartitions(group, [TopicPartition(tp.topic, tp.partition) for tp in everything])]
        res = lister.list_consumer_group_offsets(req, request_timeout=30)[group].result(30)
        return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)
    try:
        out = kp.delete_group_offsets(group, [KpTopicPartition(subscribed, 0), KpTopicPartition(other, 0),
                                              KpTopicPartition(other, 1)])
        assert out == {KpTopicPartition(subscribed, 0): kafka.errors.GroupSubscribedToTopicError,
                       KpTopicPartition(other, 0): kafka.errors.NoError,
                       KpTopicPartition(other, 1): kafka.errors.NoError}
        assert committed() == {(subscribed, 0): 0, (subscribed, 1): 0, (other, 0): NO_OFFSET, (other, 1): NO_OFFSET}
        c.close()  # the group is Empty now: nothing is protected any more
        out = kp.delete_group_offsets(group, [KpTopicPartition(subscribed, 0)])
        assert out == {KpTopicPartition(subscribed, 0): kafka.errors.NoError}
        assert committed()[(subscribed, 0)] == NO_OFFSET
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            kp.delete_group_offsets(unique_topic("no-group"), [KpTopicPartition(other, 0)])
    finally:
        kp.close()
