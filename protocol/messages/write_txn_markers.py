"""WriteTxnMarkers (key 27): the coordinator asks partition leaders to write commit/abort markers."""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 27


@schema
class WritableTxnMarkerTopic(Struct):
    name: str = f(STRING)
    partition_indexes: list[int] = f(Array(INT32))


@schema
class WritableTxnMarker(Struct):
    producer_id: int = f(INT64)
    producer_epoch: int = f(INT16)
    transaction_result: bool = f(BOOL)
    topics: list[WritableTxnMarkerTopic] = f(Array(WritableTxnMarkerTopic))
    coordinator_epoch: int = f(INT32)


@schema
class WriteTxnMarkersRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    markers: list[WritableTxnMarker] = f(Array(WritableTxnMarker))


@schema
class WritableTxnMarkerPartitionResult(Struct):
    partition_index: int = f(INT32)
    error_code: int = f(INT16)


@schema
class WritableTxnMarkerTopicResult(Struct):
    name: str = f(STRING)
    partitions: list[WritableTxnMarkerPartitionResult] = f(Array(WritableTxnMarkerPartitionResult))


@schema
class WritableTxnMarkerResult(Struct):
    producer_id: int = f(INT64)
    topics: list[WritableTxnMarkerTopicResult] = f(Array(WritableTxnMarkerTopicResult))


@schema
class WriteTxnMarkersResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    markers: list[WritableTxnMarkerResult] = f(Array(WritableTxnMarkerResult))
