"""The log engine: segmented partition logs with indexes, producer state and crash recovery.

Synchronous file I/O only; depends on `protocol` alone. See docs/storage.md.
"""

from .checkpoint import CheckpointFile, OffsetCheckpoint, atomic_write
from .config import LogConfig
from .loader import RecoveryStats
from .log import (
    AbortedTransaction,
    AppendResult,
    PartitionLog,
    ReadResult,
    UnexpectedAppendOffsetError,
)
from .producer_state import (
    BatchMetadata,
    CompletedTxn,
    Duplicate,
    ProducerEntry,
    ProducerStateManager,
)

__all__ = [
    "AbortedTransaction",
    "AppendResult",
    "BatchMetadata",
    "CheckpointFile",
    "CompletedTxn",
    "Duplicate",
    "LogConfig",
    "OffsetCheckpoint",
    "PartitionLog",
    "ProducerEntry",
    "ProducerStateManager",
    "ReadResult",
    "RecoveryStats",
    "UnexpectedAppendOffsetError",
    "atomic_write",
]
