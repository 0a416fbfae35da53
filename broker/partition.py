"""A partition this broker leads: its log plus the waiters that long-polling fetches park on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage.config import LogConfig
from storage.log import AppendResult, PartitionLog


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
        return cls(topic, index, plog)

    def append(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append as leader and make the data visible: the one write path for client produce and for
        the coordinators' own records. On a single broker the high watermark is the log end at once;
        replication will move it when the in-sync replicas have the data."""
        res = self.log.append(records, leader_epoch=self.leader_epoch)
        self.log.high_watermark = self.log.log_end_offset
        self.notify()
        return res

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
