"""Ketch's bundled asyncio Kafka client: Producer, Consumer, ShareConsumer, Admin, transactions.

Built on protocol/ only; works against Ketch and against any Kafka-compatible broker.

    from client import Producer, Consumer, Admin, TopicPartition
"""

from .admin import (
    Admin,
    ClusterDescription,
    GroupDescription,
    GroupListing,
    LogDirDescription,
    MemberDescription,
    NewTopic,
    PartitionDescription,
    ProducerStateDescription,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)
from .consumer import Consumer
from .errors import (
    AuthenticationError,
    BrokerResponseError,
    CommitFailedError,
    ConnectionLostError,
    ConsumerStoppedError,
    FatalError,
    GroupMaxSizeReachedError,
    IllegalStateError,
    KafkaClientError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProducerFencedError,
    RequestTimedOutError,
    RetriableError,
    TopicAlreadyExistsError,
    TransactionAbortableError,
    UnknownTopicError,
    UnsupportedVersionError,
)
from .group import RebalanceListener
from .isolation import FetchedBatches
from .partitioner import DefaultPartitioner, murmur2
from .producer import Producer
from .security import Security, security_from_properties
from .share_consumer import ShareConsumer
from .share_state import AcknowledgeType
from .structs import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    EncodedRecords,
    OffsetAndMetadata,
    RecordMetadata,
    ShareRecord,
    TopicPartition,
)
from .transactions import PreparedTransaction, ProducerTxnState

__all__ = [
    "AcknowledgeType", "Admin", "AuthenticationError", "BrokerResponseError", "ClusterDescription", "CommitFailedError", "ConnectionLostError", "Consumer",
    "ConsumerGroupMetadata", "ConsumerRecord", "ConsumerStoppedError", "DefaultPartitioner", "EncodedRecords",
    "FatalError", "FetchedBatches",
    "GroupDescription", "GroupListing", "GroupMaxSizeReachedError", "IllegalStateError", "KafkaClientError",
    "KafkaTimeoutError", "LogDirDescription", "MemberDescription", "NewTopic", "NoBrokersAvailableError", "OffsetAndMetadata",
    "PartitionDescription", "Producer", "ProducerFencedError", "ProducerStateDescription",
    "RebalanceListener", "RecordMetadata", "RequestTimedOutError", "RetriableError", "Security",
    "security_from_properties", "ShareConsumer", "ShareRecord",
    "TopicAlreadyExistsError", "TopicDescription", "TopicPartition", "TransactionAbortableError",
    "TransactionDescription", "TransactionListing", "PreparedTransaction", "ProducerTxnState", "UnknownTopicError",
    "UnsupportedVersionError", "murmur2",
]
