"""What the Admin client returns and takes: plain frozen records, apart from the client itself so
that admin.py holds the routing and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .cluster import BrokerNode
from .errors import KafkaClientError
from .structs import TopicPartition


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    # -1: the broker's default.replication.factor, as Kafka's admin clients leave it unset.
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType ids)
CONFIG_SET, CONFIG_DELETE, CONFIG_APPEND, CONFIG_SUBTRACT = 0, 1, 2, 3
RESOURCE_TOPIC = 2


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One key's change: SET to value, DELETE (back to the default), or APPEND/SUBTRACT items of
    a list-valued config (cleanup.policy)."""

    name: str
    value: str | None = None
    op: int = CONFIG_SET


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int  # -1: none known
    brokers: tuple[BrokerNode, ...]  # those serving clients
    # registered but fenced (silent too long, or not yet caught up): not offered to clients
    fenced_brokers: tuple[BrokerNode, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of one broker: the size in bytes of each partition stored in it (only the
    asked-for topics' if describe_log_dirs was given some). total/usable bytes are -1 when the
    broker does not report them (DescribeLogDirs before v4)."""

    broker_id: int
    path: str
    error: KafkaClientError | None
    partition_sizes: Mapping[TopicPartition, int]
    total_bytes: int = -1
    usable_bytes: int = -1
    # how far each replica here is behind its partition's high watermark (0 on the leader)
    offset_lags: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]
    member_epoch: int = -1  # a consumer group's (KIP-848); -1 for a classic group
    target_assignment: tuple[TopicPartition, ...] = ()  # a consumer group's member is moving towards it


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # a classic group's protocol; a consumer group's server assignor
    members: tuple[MemberDescription, ...]
    group_type: str = "classic"  # or "consumer" (KIP-848)
    group_epoch: int = -1  # a consumer group's group and assignment epochs
    assignment_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int = -1  # the broker that listed it: the transactional id's coordinator


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerStateDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a topic: its effective value and where that comes from (`source`, Kafka's
    ConfigSource ids: 1 set on the topic, 4 the broker's static setting, 5 the default)."""

    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment under way: the replica set now, and the replicas being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp: int  # ms since the epoch; -1 unknown


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The metadata quorum as its leader sees it (DescribeQuorum)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumVoter, ...]
