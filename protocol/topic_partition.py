"""The one TopicPartition type, shared by the broker, the client and the pipeline.

A NamedTuple, so it compares and hashes equal to a plain (topic, partition) tuple: code that
builds keys from the wire as tuples and code that holds TopicPartitions meet in the same dicts.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic: the unit of ordering, replication, assignment and offsets."""

    topic: str
    partition: int
