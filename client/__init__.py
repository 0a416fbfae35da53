"""Ketch's bundled asyncio Kafka client: Producer, Consumer, ShareConsumer, Admin, transactions.

Built on protocol/ only; works against Ketch and against any Kafka-compatible broker.

    from client import Producer, Consumer, Admin, TopicPartition

Each name is imported from its module on first use (PEP 562), so that a process that only
consumes does not build the admin client's and the producer's message classes: a Spark streaming
query starts a fresh Python process that imports the client (docs/pipeline.md, Performance).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Where each exported name lives (the modules above; tests/unit/test_lazy_imports.py checks the two agree).
_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(("Admin", "ClusterDescription", "GroupDescription", "GroupListing", "LogDirDescription",
                     "MemberDescription", "NewTopic", "PartitionDescription", "ProducerStateDescription",
                     "TopicDescription", "TransactionDescription", "TransactionListing"), "admin"),
    "Consumer": "consumer",
    **dict.fromkeys(("AuthenticationError", "BrokerResponseError", "CommitFailedError", "ConnectionLostError",
                     "ConsumerStoppedError", "FatalError", "GroupMaxSizeReachedError", "IllegalStateError",
                     "KafkaClientError", "KafkaTimeoutError", "NoBrokersAvailableError", "ProducerFencedError",
                     "RequestTimedOutError", "RetriableError", "TopicAlreadyExistsError",
                     "TransactionAbortableError", "UnknownTopicError", "UnsupportedVersionError"), "errors"),
    "RebalanceListener": "group",
    "FetchedBatches": "isolation",
    "DefaultPartitioner": "partitioner", "murmur2": "partitioner",
    "Producer": "producer",
    "Security": "security", "security_from_properties": "security",
    "ShareConsumer": "share_consumer",
    "AcknowledgeType": "share_state",
    **dict.fromkeys(("ConsumerGroupMetadata", "ConsumerRecord", "EncodedRecords", "OffsetAndMetadata",
                     "RecordMetadata", "ShareRecord", "TopicPartition"), "structs"),
    "PreparedTransaction": "transactions", "ProducerTxnState": "transactions",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


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
