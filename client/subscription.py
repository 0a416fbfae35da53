"""What a consumer is assigned and where it stands in each partition.

Shared by the fetcher (which reads positions and advances them past skipped batches), the group
member (which replaces the assignment at a rebalance) and the consumer API (seek, pause, position).
"""

from __future__ import annotations

from dataclasses import dataclass

from .structs import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"


@dataclass(slots=True)
class PartitionState:
    position: int | None = None  # offset of the next record to hand out; None until resolved
    reset: str | None = None  # pending seek_to_beginning/end (or auto reset) to resolve
    paused: bool = False
    high_watermark: int = -1
    last_stable_offset: int = -1
    max_bytes: int = 1_048_576
    epoch: int = 0  # bumped by every seek: answers to fetches sent before it are dropped


class SubscriptionState:
    def __init__(self, auto_offset_reset: str) -> None:
        if auto_offset_reset not in (EARLIEST, LATEST, NONE):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        self.auto_offset_reset = auto_offset_reset
        self.topics: tuple[str, ...] = ()  # subscribe(); empty with assign()
        self.pattern: str | None = None  # subscribe(pattern=...): the coordinator matches it (KIP-848)
        self.user_assigned = False
        self.partitions: dict[TopicPartition, PartitionState] = {}

    def assign(self, tps: set[TopicPartition]) -> None:
        """Replace the assignment; partitions kept keep their position."""
        self.partitions = {tp: self.partitions.get(tp) or PartitionState() for tp in sorted(tps)}

    def add(self, tps: set[TopicPartition]) -> None:
        for tp in sorted(tps):
            self.partitions.setdefault(tp, PartitionState())

    def remove(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    @property
    def subscribed(self) -> bool:
        return bool(self.topics or self.pattern)

    @property
    def assigned(self) -> set[TopicPartition]:
        return set(self.partitions)

    def state(self, tp: TopicPartition) -> PartitionState:
        s = self.partitions.get(tp)
        if s is None:
            raise KeyError(f"{tp} is not assigned to this consumer")
        return s

    def seek(self, tp: TopicPartition, offset: int) -> None:
        s = self.state(tp)
        s.position, s.reset = offset, None
        s.epoch += 1

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        s = self.state(tp)
        s.position, s.reset = None, strategy
        s.epoch += 1

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if not s.paused and s.position is not None]

    def needing_position(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if s.position is None]
