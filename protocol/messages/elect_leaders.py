"""ElectLeaders (key 43): move partitions' leadership to their preferred replica (the first of
the replica list) or, unclean, to any live replica when no in-sync one is left. v0 has no election
type (preferred); a null topic list means every partition."""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, Array, Message, Struct, f, schema

KEY = 43
PREFERRED = 0
UNCLEAN = 1


@schema
class TopicPartitions(Struct):
    topic: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class ElectLeadersRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    election_type: int = f(INT8, "1+")
    topic_partitions: list[TopicPartitions] | None = f(Array(TopicPartitions), default=None)
    timeout_ms: int = f(INT32, default=60000)


@schema
class PartitionResult(Struct):
    partition_id: int = f(INT32)
    error_code: int = f(INT16)
    error_message: str | None = f(STRING, default=None)


@schema
class ReplicaElectionResult(Struct):
    topic: str = f(STRING)
    partition_result: list[PartitionResult] = f(Array(PartitionResult))


@schema
class ElectLeadersResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16, "1+")
    replica_election_results: list[ReplicaElectionResult] = f(Array(ReplicaElectionResult))
