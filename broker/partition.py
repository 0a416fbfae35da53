"""A partition this broker leads: its log plus the waiters that long-polling fetches park on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig
from storage.leader_epoch import end_offset_for
from storage.log import AppendResult, PartitionLog

logger = structlog.get_logger(__name__)

HIGH_WATERMARK = -1  # DeleteRecords' offset for "everything committed so far"


class Partition:
    __slots__ = ("topic", "index", "log", "leader_epoch", "_waiters")

    def __init__(self, topic: str, index: int, log: PartitionLog, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def open(cls, data_dir: Path, topic: str, index: int, config: LogConfig) -> Partition:
        plog = PartitionLog.open(data_dir / f"{topic}-{index}", config)
        # A single broker is the whole ISR: everything in its log is committed.
        plog.high_watermark = plog.log_end_offset
        # A leader never leads below an epoch its log already holds (Kafka's controller only ever
        # raises epochs): its appends would not enter the epoch history, and OffsetForLeaderEpoch
        # answers would contradict the data. One broker alone never raises its epoch, so this is 0
        # unless the log was written under later epochs elsewhere.
        return cls(topic, index, plog, max(0, plog.latest_epoch))

    def append(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append as leader and make the data visible: the one write path for client produce and for
        the coordinators' own records. On a single broker the high watermark is the log end at once;
        replication will move it when the in-sync replicas have the data."""
        res = self.log.append(records, leader_epoch=self.leader_epoch)
        self.log.high_watermark = self.log.log_end_offset
        self.notify()
        return res

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader, as Kafka's Partition.deleteRecordsOnLeader: returns the new
        log start (the low watermark; on one broker no replica lags behind it).

        Only a topic whose cleanup.policy includes delete may lose records this way: on a compacted
        topic the log start is the cleaner's business, and Kafka refuses with POLICY_VIOLATION.
        """
        if not self.log.config.deletes:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Records of partition {self.topic}-{self.index} can not be deleted due to the "
                             f"configured policy")
        target = self.log.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"The offset {target} for partition {self.topic}-{self.index} is not valid")
        before = self.log.log_start_offset
        start = self.log.delete_records_before(target)
        if start != before:
            logger.info("log start offset moved by DeleteRecords", topic=self.topic, partition=self.index,
                        log_start_offset=start, previous=before)
            # Parked fetches re-check their offsets: one now below the start gets OFFSET_OUT_OF_RANGE.
            self.notify()
        return start

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset) as OffsetForLeaderEpoch answers; (-1, -1) unknown.

        Kafka's leader writes its epoch into the history the moment it becomes leader; ours enters
        it with the first append under that epoch. Until then the current epoch is added here,
        starting at the log end, so that asking for it (a consumer whose position is current)
        gets the log end rather than UNDEFINED.
        """
        entries = self.log.leader_epochs
        leo = self.log.log_end_offset
        if not entries or entries[-1][0] < self.leader_epoch:
            entries = [(e, start) for e, start in entries if start < leo] + [(self.leader_epoch, leo)]
        return end_offset_for(entries, epoch, leo)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.append(fut)

    def notify(self) -> None:
        """Wake fetches parked on this partition: new data (or a moved LSO) is there."""
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def discard_waiter(self, fut: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass
