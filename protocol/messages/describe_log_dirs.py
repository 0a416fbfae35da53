"""DescribeLogDirs (key 35): the broker's log directories and the size of each partition in them.

The schema reaches v5 (is_cordoned, KIP-1066) so that the newest clients' requests decode;
protocol/supported.py decides what is advertised.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, f, schema

KEY = 35


@schema
class DescribableLogDirTopic(Struct):
    topic: str = f(STRING)
    partitions: list[int] = f(Array(INT32))


@schema
class DescribeLogDirsRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    topics: list[DescribableLogDirTopic] | None = f(Array(DescribableLogDirTopic), default=None)  # null: all


@schema
class DescribeLogDirsPartition(Struct):
    partition_index: int = f(INT32)
    partition_size: int = f(INT64)
    offset_lag: int = f(INT64)
    is_future_key: bool = f(BOOL)


@schema
class DescribeLogDirsTopic(Struct):
    name: str = f(STRING)
    partitions: list[DescribeLogDirsPartition] = f(Array(DescribeLogDirsPartition))


@schema
class DescribeLogDirsResult(Struct):
    error_code: int = f(INT16)
    log_dir: str = f(STRING)
    topics: list[DescribeLogDirsTopic] = f(Array(DescribeLogDirsTopic))
    total_bytes: int = f(INT64, "4+", default=-1)
    usable_bytes: int = f(INT64, "4+", default=-1)
    is_cordoned: bool = f(BOOL, "5+", default=False)


@schema
class DescribeLogDirsResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16, "3+")
    results: list[DescribeLogDirsResult] = f(Array(DescribeLogDirsResult))
