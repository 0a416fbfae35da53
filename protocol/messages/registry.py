"""Every API this broker speaks: api key -> request and response schema classes.

`REQUESTS` and `RESPONSES` are read-only mappings that import an API's module the first time its
key is looked up. A process uses few of the APIs: a client a dozen, and every message class is a
frozen slotted dataclass built at import (5-30 ms a module), which a Spark source runner, a fresh
process per streaming query, would otherwise pay for all of them (docs/pipeline.md, Performance).
Iterating the values or items loads every API; the keys, `len` and `in` need no import.

Loading an API marks its request class as Kafka decodes requests (`refuse_nulls`), before any
request of that API can be decoded through the registry.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Final, TypeVar, overload

from ..schema import Message, refuse_nulls

D = TypeVar("D")

# api key -> (module of protocol/messages/, class name without its "Request"/"Response" suffix)
_APIS: Final[dict[int, tuple[str, str]]] = {
    0: ("produce", "Produce"),
    1: ("fetch", "Fetch"),
    # the metadata quorum (KRaft), on the controller listener
    52: ("vote", "Vote"),
    53: ("begin_quorum_epoch", "BeginQuorumEpoch"),
    54: ("end_quorum_epoch", "EndQuorumEpoch"),
    55: ("describe_quorum", "DescribeQuorum"),
    59: ("fetch_snapshot", "FetchSnapshot"),
    67: ("allocate_producer_ids", "AllocateProducerIds"),
    62: ("broker_registration", "BrokerRegistration"),
    63: ("broker_heartbeat", "BrokerHeartbeat"),
    73: ("assign_replicas_to_dirs", "AssignReplicasToDirs"),
    56: ("alter_partition", "AlterPartition"),
    43: ("elect_leaders", "ElectLeaders"),
    45: ("partition_reassignments", "AlterPartitionReassignments"),
    46: ("partition_reassignments", "ListPartitionReassignments"),
    75: ("describe_topic_partitions", "DescribeTopicPartitions"),
    2: ("list_offsets", "ListOffsets"),
    3: ("metadata", "Metadata"),
    8: ("offset_commit", "OffsetCommit"),
    9: ("offset_fetch", "OffsetFetch"),
    10: ("find_coordinator", "FindCoordinator"),
    11: ("join_group", "JoinGroup"),
    12: ("heartbeat", "Heartbeat"),
    13: ("leave_group", "LeaveGroup"),
    14: ("sync_group", "SyncGroup"),
    15: ("describe_groups", "DescribeGroups"),
    16: ("list_groups", "ListGroups"),
    18: ("api_versions", "ApiVersions"),
    19: ("create_topics", "CreateTopics"),
    20: ("delete_topics", "DeleteTopics"),
    22: ("init_producer_id", "InitProducerId"),
    24: ("add_partitions_to_txn", "AddPartitionsToTxn"),
    25: ("add_offsets_to_txn", "AddOffsetsToTxn"),
    26: ("end_txn", "EndTxn"),
    27: ("write_txn_markers", "WriteTxnMarkers"),
    28: ("txn_offset_commit", "TxnOffsetCommit"),
    32: ("describe_configs", "DescribeConfigs"),
    42: ("delete_groups", "DeleteGroups"),
    33: ("alter_configs", "AlterConfigs"),
    37: ("create_partitions", "CreatePartitions"),
    44: ("incremental_alter_configs", "IncrementalAlterConfigs"),
    61: ("describe_producers", "DescribeProducers"),
    65: ("describe_transactions", "DescribeTransactions"),
    66: ("list_transactions", "ListTransactions"),
    21: ("delete_records", "DeleteRecords"),
    35: ("describe_log_dirs", "DescribeLogDirs"),
    34: ("alter_replica_log_dirs", "AlterReplicaLogDirs"),
    23: ("offset_for_leader_epoch", "OffsetForLeaderEpoch"),
    60: ("describe_cluster", "DescribeCluster"),
    47: ("offset_delete", "OffsetDelete"),
    93: ("get_replica_log_info", "GetReplicaLogInfo"),
    68: ("consumer_group_heartbeat", "ConsumerGroupHeartbeat"),
    69: ("consumer_group_describe", "ConsumerGroupDescribe"),
    29: ("describe_acls", "DescribeAcls"),
    30: ("create_acls", "CreateAcls"),
    31: ("delete_acls", "DeleteAcls"),
    76: ("share_group_heartbeat", "ShareGroupHeartbeat"),
    77: ("share_group_describe", "ShareGroupDescribe"),
    78: ("share_fetch", "ShareFetch"),
    79: ("share_fetch", "ShareAcknowledge"),
    83: ("share_group_state", "InitializeShareGroupState"),
    84: ("share_group_state", "ReadShareGroupState"),
    85: ("share_group_state", "WriteShareGroupState"),
    86: ("share_group_state", "DeleteShareGroupState"),
    17: ("sasl", "SaslHandshake"),
    36: ("sasl", "SaslAuthenticate"),
    50: ("user_scram_credentials", "DescribeUserScramCredentials"),
    51: ("user_scram_credentials", "AlterUserScramCredentials"),
}

_lock = threading.Lock()  # a pipeline process looks APIs up from its loop thread and its task threads


class _Registry(Mapping[int, type[Message]]):
    """One side (requests or responses) of the registry, filled as APIs are first looked up."""

    def __init__(self) -> None:
        self._loaded: dict[int, type[Message]] = {}

    def __getitem__(self, key: int) -> type[Message]:
        cls = self._loaded.get(key)
        if cls is None:
            _load(key)  # KeyError for a key no API has
            cls = self._loaded[key]
        return cls

    @overload
    def get(self, key: int, /) -> type[Message] | None: ...
    @overload
    def get(self, key: int, default: type[Message] | D, /) -> type[Message] | D: ...

    def get(self, key: int, default: object = None) -> object:
        cls = self._loaded.get(key)
        if cls is not None:
            return cls
        return self[key] if key in _APIS else default

    def __contains__(self, key: object) -> bool:
        return key in _APIS

    def __iter__(self) -> Iterator[int]:
        return iter(_APIS)

    def __len__(self) -> int:
        return len(_APIS)


REQUESTS: Final = _Registry()
RESPONSES: Final = _Registry()


def _load(key: int) -> None:
    module_name, name = _APIS[key]
    with _lock:
        if key in REQUESTS._loaded:
            return
        module = importlib.import_module(f"{__package__}.{module_name}")
        req: type[Message] = getattr(module, f"{name}Request")
        resp: type[Message] = getattr(module, f"{name}Response")
        refuse_nulls(req)
        RESPONSES._loaded[key] = resp
        REQUESTS._loaded[key] = req  # last: a reader that finds the request finds both loaded
