"""The one table of API versions this broker advertises in ApiVersions.

Ranges are chosen to cover what real clients send (see docs/protocol.md) including the flexible
versions newer clients prefer. An API appears here only when the broker has a handler for it.
"""

from __future__ import annotations

from .messages.api_versions import ApiVersion

SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 11),   # Produce (v11: TRANSACTION_ABORTABLE understood; v12 needs transaction.version 2)
    1: (4, 17),   # Fetch (v17: the follower's directory id, KIP-853)
    2: (0, 10),   # ListOffsets (v10: timeout_ms for tiered storage lookups; answered at once)
    3: (0, 12),   # Metadata
    8: (0, 9),    # OffsetCommit (v9: as v8 for classic groups; the epoch is the generation)
    9: (0, 9),    # OffsetFetch (v9: member id/epoch, which classic groups ignore, as Kafka's)
    10: (0, 6),   # FindCoordinator (v6: share-group keys, refused: no share groups)
    11: (0, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    15: (0, 5),   # DescribeGroups
    16: (0, 5),   # ListGroups
    17: (0, 1),   # SaslHandshake (v0: the tokens follow as bare frames; v1: in SaslAuthenticate)
    18: (0, 4),   # ApiVersions
    19: (0, 7),   # CreateTopics
    20: (0, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    22: (0, 6),   # InitProducerId (v6: two-phase commit, KIP-939)
    23: (0, 4),   # OffsetForLeaderEpoch (Kafka 4.0 dropped v0-1, KIP-896; older clients still send them)
    24: (0, 5),   # AddPartitionsToTxn (v4: broker-to-broker batches and verify_only, KIP-890)
    25: (0, 4),   # AddOffsetsToTxn
    26: (0, 5),   # EndTxn (v5: epoch bumped at every transaction end, KIP-890)
    27: (0, 1),   # WriteTxnMarkers
    28: (0, 4),   # TxnOffsetCommit
    29: (0, 3),   # DescribeAcls (SECURITY_DISABLED unless the authorizer is on; docs/security.md)
    30: (0, 3),   # CreateAcls (decided by the controller)
    31: (0, 3),   # DeleteAcls (decided by the controller)
    32: (0, 4),   # DescribeConfigs
    33: (0, 2),   # AlterConfigs (topics; broker configs are static)
    34: (0, 2),   # AlterReplicaLogDirs (a replica moves to another log directory: broker/partition/move.py)
    35: (0, 4),   # DescribeLogDirs (the schema reaches v5: is_cordoned, KIP-1066)
    36: (0, 2),   # SaslAuthenticate
    37: (0, 3),   # CreatePartitions
    42: (0, 2),   # DeleteGroups
    43: (0, 2),   # ElectLeaders (preferred and unclean; decided by the controller)
    45: (0, 0),   # AlterPartitionReassignments (decided by the controller)
    46: (0, 0),   # ListPartitionReassignments
    44: (0, 1),   # IncrementalAlterConfigs (topics; broker configs are static)
    47: (0, 0),   # OffsetDelete
    50: (0, 0),   # DescribeUserScramCredentials (from this broker's metadata image)
    51: (0, 0),   # AlterUserScramCredentials (decided by the controller)
    60: (0, 2),   # DescribeCluster
    61: (0, 0),   # DescribeProducers
    65: (0, 0),   # DescribeTransactions
    66: (0, 1),   # ListTransactions
    68: (0, 1),   # ConsumerGroupHeartbeat (KIP-848; v1 adds regex subscriptions and is all librdkafka 2.16 sends)
    69: (0, 0),   # ConsumerGroupDescribe (KIP-848)
    55: (0, 2),   # DescribeQuorum (the metadata quorum, also answered on the controller listener)
    75: (0, 0),   # DescribeTopicPartitions (KIP-966)
    76: (1, 1),   # ShareGroupHeartbeat (KIP-932; v0 was Kafka 4.0's early access, 1 is 4.1's and librdkafka 2.16's)
    77: (1, 1),   # ShareGroupDescribe (KIP-932)
    78: (1, 1),   # ShareFetch (KIP-932; v2's acquire modes and RENEW, KIP-1206/1222, not yet)
    79: (1, 1),   # ShareAcknowledge (KIP-932)
    83: (0, 0),   # InitializeShareGroupState (the share coordinator's, between brokers: CLUSTER_ACTION)
    84: (0, 0),   # ReadShareGroupState
    85: (0, 0),   # WriteShareGroupState
    86: (0, 0),   # DeleteShareGroupState
    93: (0, 0),   # GetReplicaLogInfo (KIP-966's unclean recovery; the controller asks, inter-broker listener only)
}

# The controller listener speaks the metadata quorum's protocol (KRaft) and takes the topic changes brokers forward.
CONTROLLER_SUPPORTED: dict[int, tuple[int, int]] = {
    1: (13, 17),  # Fetch of __cluster_metadata-0 (topic ids, replica state)
    17: (0, 1),   # SaslHandshake (a SASL controller listener: brokers log in)
    36: (0, 2),   # SaslAuthenticate
    18: (0, 4),   # ApiVersions
    19: (0, 7),   # CreateTopics (forwarded by brokers)
    20: (0, 6),   # DeleteTopics (forwarded)
    30: (0, 3),   # CreateAcls (forwarded)
    31: (0, 3),   # DeleteAcls (forwarded)
    33: (0, 2),   # AlterConfigs (topic configs, forwarded)
    37: (0, 3),   # CreatePartitions (forwarded)
    43: (0, 2),   # ElectLeaders (forwarded)
    45: (0, 0),   # AlterPartitionReassignments (forwarded)
    46: (0, 0),   # ListPartitionReassignments (forwarded)
    51: (0, 0),   # AlterUserScramCredentials (forwarded)
    52: (0, 2),   # Vote (v2: pre-vote, KIP-996)
    53: (0, 1),   # BeginQuorumEpoch
    54: (0, 1),   # EndQuorumEpoch
    55: (0, 2),   # DescribeQuorum
    56: (0, 3),   # AlterPartition (partition leaders' ISR changes)
    59: (0, 1),   # FetchSnapshot
    62: (0, 4),   # BrokerRegistration
    63: (0, 1),   # BrokerHeartbeat
    67: (0, 0),   # AllocateProducerIds (brokers ask the active controller for a block)
    73: (0, 0),   # AssignReplicasToDirs (which log directory holds each replica, KIP-858)
}

API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 36: "SaslAuthenticate",
    50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
    23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn",
    26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs",
    34: "AlterReplicaLogDirs", 35: "DescribeLogDirs",
    37: "CreatePartitions", 42: "DeleteGroups", 43: "ElectLeaders", 45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 44: "IncrementalAlterConfigs", 56: "AlterPartition",
    47: "OffsetDelete", 60: "DescribeCluster",
    61: "DescribeProducers", 65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch",
    79: "ShareAcknowledge", 83: "InitializeShareGroupState", 84: "ReadShareGroupState", 85: "WriteShareGroupState",
    86: "DeleteShareGroupState", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
    55: "DescribeQuorum", 59: "FetchSnapshot", 67: "AllocateProducerIds", 62: "BrokerRegistration",
    63: "BrokerHeartbeat", 73: "AssignReplicasToDirs", 93: "GetReplicaLogInfo",
}


def api_versions_table(table: dict[int, tuple[int, int]] | None = None) -> list[ApiVersion]:
    """The ApiVersions answer's ranges (also the v0 body of the UNSUPPORTED_VERSION fallback)."""
    return [ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted((SUPPORTED if table is None else table).items())]
