"""ListOffsets with the MAX_TIMESTAMP spec (KIP-734) through real clients: the offset and the
timestamp of the record with the largest timestamp, not of the last record."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec
from helpers import BrokerProcess, unique_topic
from helpers.confluent import QUIET, admin, create_topic

pytestmark = pytest.mark.compat

# (timestamp) of each record, in produce order: the largest is the second record's.
TIMESTAMPS = [1_700_000_001_000, 1_700_000_009_000, 1_700_000_005_000, 1_700_000_002_000]


def _max_timestamp(bootstrap: str, topic: str) -> tuple[int, int]:
    client = admin(bootstrap)  # must outlive the future: destroying it cancels the request
    futs = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()}, request_timeout=20)
    info = next(iter(futs.values())).result(20)
    return info.offset, info.timestamp


def test_confluent_max_timestamp_names_the_record_with_the_largest_timestamp(broker: BrokerProcess) -> None:
    topic = unique_topic("maxts")
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **QUIET})
    for i, ts in enumerate(TIMESTAMPS):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
        p.flush(10)  # one batch per record: the answer must come from inside the log, not a batch header
    assert _max_timestamp(broker.bootstrap, topic) == (1, TIMESTAMPS[1])


def test_confluent_max_timestamp_inside_one_batch(broker: BrokerProcess) -> None:
    topic = unique_topic("maxts-batch")
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, **QUIET})
    for i, ts in enumerate(TIMESTAMPS):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
    assert p.flush(10) == 0
    assert _max_timestamp(broker.bootstrap, topic) == (1, TIMESTAMPS[1])


def test_confluent_max_timestamp_of_an_empty_partition(broker: BrokerProcess) -> None:
    topic = unique_topic("maxts-empty")
    create_topic(broker.bootstrap, topic, 1)
    assert _max_timestamp(broker.bootstrap, topic) == (-1, -1)
