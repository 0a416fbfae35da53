"""Reading consumer-protocol subscriptions for OffsetDelete, against the bundled client's encoder."""

from __future__ import annotations

import struct

import pytest

from broker.group.subscriptions import subscribed_topics, subscription_topics
from client.assignors import Subscription, TopicPartition, encode_subscription


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_is_read_through_its_v0_prefix(version: int) -> None:
    sub = Subscription(("a", "bé"), owned_partitions=(TopicPartition("a", 1),), generation_id=4,
                       user_data=b"ud", rack_id="r")
    assert subscription_topics(encode_subscription(sub, version)) == ["a", "bé"]


def test_a_future_version_with_more_fields_is_read_too() -> None:
    v3_body = encode_subscription(Subscription(("x",)), 3)[2:]
    assert subscription_topics(struct.pack(">h", 7) + v3_body + b"fields of v7") == ["x"]


@pytest.mark.parametrize("data", [
    b"",
    b"\x00\x01raw",                                  # count runs past the end
    b"\xff\xff" + struct.pack(">i", 0) + b"\xff\xff\xff\xff",  # negative version
    b"\x00\x00" + struct.pack(">i", 1) + b"\xff\xff",  # null topic name
    b"\x00\x00" + struct.pack(">i", 1) + b"\x00\x01t",  # no user data: truncated
    b"\x00\x00" + struct.pack(">i", 1) + b"\x00\x01\xff\xff\xff\xff\xff",  # not UTF-8
])
def test_malformed_subscriptions_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        subscription_topics(data)


def test_group_level_union_and_unknowns() -> None:
    a, b = encode_subscription(Subscription(("t",))), encode_subscription(Subscription(("u", "t")))
    assert subscribed_topics("g", "consumer", "range", [a, b]) == {"t", "u"}
    assert subscribed_topics("g", "consumer", None, []) == frozenset()  # Empty: subscribes to nothing
    assert subscribed_topics("g", "consumer", None, [a]) is None  # no protocol chosen yet
    assert subscribed_topics("g", "consumer", "range", [a, b"junk"]) is None
    assert subscribed_topics("g", "connect", "x", [a]) is None
    assert subscribed_topics("g", None, None, []) is None
