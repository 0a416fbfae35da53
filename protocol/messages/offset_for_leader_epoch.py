"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, for truncation detection (KIP-101/320).

Consumers ask it after a leader change, with the epoch of the last record they consumed: an end
offset below their position means the log they read from was truncated. Versions 0-1 are gone from
Kafka 4.0 (KIP-896) but cost nothing to keep for older clients.
"""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 23


@schema
class OffsetForLeaderPartition(Struct):
    partition: int = f(INT32)
    # -1: the client does not know the current epoch, so nothing is fenced
    current_leader_epoch: int = f(INT32, "2+", default=-1)
    leader_epoch: int = f(INT32)


@schema
class OffsetForLeaderTopic(Struct):
    topic: str = f(STRING)
    partitions: list[OffsetForLeaderPartition] = f(Array(OffsetForLeaderPartition))


@schema
class OffsetForLeaderEpochRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    # -1 from a consumer, a broker id from a follower; -2 (the default) is a "debug" consumer
    replica_id: int = f(INT32, "3+", default=-2)
    topics: list[OffsetForLeaderTopic] = f(Array(OffsetForLeaderTopic))


@schema
class EpochEndOffset(Struct):
    error_code: int = f(INT16)
    partition: int = f(INT32)
    leader_epoch: int = f(INT32, "1+", default=-1)
    end_offset: int = f(INT64, default=-1)


@schema
class OffsetForLeaderTopicResult(Struct):
    topic: str = f(STRING)
    partitions: list[EpochEndOffset] = f(Array(EpochEndOffset))


@schema
class OffsetForLeaderEpochResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    throttle_time_ms: int = f(INT32, "2+")
    topics: list[OffsetForLeaderTopicResult] = f(Array(OffsetForLeaderTopicResult))
