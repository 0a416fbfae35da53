"""Per-partition queues of record batches waiting to be sent.

send() appends to the last open batch of its partition; a batch closes when it reaches
`batch_size` bytes (estimated before compression, as Java does) or when the sender drains it after
`linger`. A drained batch is encoded once, with its producer id, epoch and base sequence, and keeps
those bytes for every retry: an idempotent retry must be the same batch, byte for byte, or the
broker's duplicate detection cannot recognise it.

Retried batches go back to the head of their queue, in sequence order, ahead of batches never
sent; the sender sends them one at a time until the queue is clean again (see producer.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.records import RecordFields, build_batch_from_messages, build_batch_from_section

from .structs import EncodedRecords, RecordMetadata, TopicPartition

RECORD_OVERHEAD = 22  # length, attributes, deltas, key/value lengths, header count: a fair upper estimate
BATCH_OVERHEAD = 61


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    created: float
    deadline: float
    loop: asyncio.AbstractEventLoop
    messages: list[RecordFields] = field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    closed: bool = False  # no more appends (full, or drained once)
    base_sequence: int = -1  # assigned at the first drain; kept for retries
    producer_id: int = -1
    producer_epoch: int = -1
    encoded: bytes | None = None
    attempts: int = 0
    retry_at: float = 0.0
    done: asyncio.Future[None] | None = None
    finished: bool = False
    framed: EncodedRecords | None = None  # records the caller framed itself (send_batch): one future

    @property
    def count(self) -> int:
        return len(self.messages) if self.framed is None else self.framed.record_count

    @property
    def is_retry(self) -> bool:
        return self.attempts > 0

    def encode(self, *, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool,
               compression: int) -> bytes:
        if self.encoded is None:
            self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
            if self.framed is not None:
                f = self.framed
                self.encoded = build_batch_from_section(
                    f.section, f.record_count, base_timestamp=f.base_timestamp, max_timestamp=f.max_timestamp,
                    producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                    transactional=transactional, compression=compression)
            else:
                self.encoded = build_batch_from_messages(
                    self.messages, producer_id=producer_id, producer_epoch=producer_epoch,
                    base_sequence=base_sequence, transactional=transactional, compression=compression)
        return self.encoded

    def reset_sequence(self) -> None:
        """Forget the encoding: the broker lost our sequence state (KIP-360), so the batch is
        encoded again under the new epoch and a new sequence at its next drain. Only safe for a
        batch the broker is known not to have written."""
        self.encoded = None
        self.base_sequence = self.producer_id = self.producer_epoch = -1

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """Resolve every record's future. One RecordMetadata per record is unavoidable (it is the
        future's result), so it is built with tuple.__new__ straight from the values: the
        NamedTuple constructor adds a Python call per record, a measurable share of the
        producer's CPU at high rates."""
        if self.finished:
            return
        topic, partition = self.tp
        new, rm = tuple.__new__, RecordMetadata
        offset = base_offset if base_offset >= 0 else -1
        if self.framed is not None:  # one future for the whole batch: where its first record went
            first_ts = log_append_time if log_append_time >= 0 else self.framed.base_timestamp
            for fut in self.futures:
                if not fut.done():
                    fut.set_result(new(rm, (topic, partition, offset, first_ts, log_append_time)))
            self._finish()
            return
        step = 1 if base_offset >= 0 else 0
        for fut, msg in zip(self.futures, self.messages, strict=True):
            if not fut.done():  # the caller may have cancelled it: the record is delivered anyway
                ts = log_append_time if log_append_time >= 0 else msg[3]
                fut.set_result(new(rm, (topic, partition, offset, -1 if ts is None else ts, log_append_time)))
            offset += step
        self._finish()

    def fail(self, error: BaseException) -> None:
        if self.finished:
            return
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # mark retrieved: an ignored delivery future is the caller's choice
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        self.closed = True
        self.messages = []
        self.futures = []
        self.encoded = None
        self.framed = None
        if self.done is not None and not self.done.done():
            self.done.set_result(None)


class Accumulator:
    def __init__(self, batch_size: int, linger: float, delivery_timeout: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.batch_size = batch_size
        self.linger = linger
        self.delivery_timeout = delivery_timeout
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.buffered_bytes = 0
        self.incomplete: dict[ProducerBatch, None] = {}  # in the order appended: failed in that order

    def append(self, tp: TopicPartition, message: RecordFields, size: int, loop: asyncio.AbstractEventLoop
               ) -> tuple[asyncio.Future[RecordMetadata], bool, bool]:
        """Add one message of `size` (estimated) bytes; returns its delivery future, whether its
        batch is new (the sender must start the linger timer) and whether it is now full."""
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = deque()
        batch = q[-1] if q else None
        new = batch is None or batch.closed or (bool(batch.messages) and batch.size + size > self.batch_size)
        if new:
            if batch is not None:
                batch.closed = True
            now = self._clock.monotonic()
            batch = ProducerBatch(tp, now, now + self.delivery_timeout, loop)
            batch.done = loop.create_future()
            q.append(batch)
            self.incomplete[batch] = None
        assert batch is not None
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        batch.messages.append(message)
        batch.futures.append(fut)
        batch.size += size
        self.buffered_bytes += size
        full = batch.size >= self.batch_size
        if full:
            batch.closed = True
        return fut, new, full

    def append_framed(self, tp: TopicPartition, records: EncodedRecords, size: int,
                      loop: asyncio.AbstractEventLoop) -> asyncio.Future[RecordMetadata]:
        """Queue records framed by the caller as a batch of their own, closed at once; the open
        batch of the partition (records sent one by one before) is closed first, so order is kept."""
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = deque()
        if q:
            q[-1].closed = True
        now = self._clock.monotonic()
        batch = ProducerBatch(tp, now, now + self.delivery_timeout, loop, size=size, closed=True, framed=records)
        batch.done = loop.create_future()
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        batch.futures.append(fut)
        q.append(batch)
        self.incomplete[batch] = None
        self.buffered_bytes += size
        return fut

    def pop(self, tp: TopicPartition) -> ProducerBatch:
        batch = self.queues[tp].popleft()
        batch.closed = True
        return batch

    def released(self, batch: ProducerBatch) -> None:
        """The batch is finished (acknowledged or failed): its bytes no longer count."""
        if batch in self.incomplete:
            del self.incomplete[batch]
            self.buffered_bytes -= batch.size

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a failed batch back, ahead of never-sent batches and in sequence order."""
        batch.retry_at = retry_at
        q = self.queues.setdefault(batch.tp, deque())
        retries = [b for b in q if b.is_retry]
        fresh = [b for b in q if not b.is_retry]
        retries.append(batch)
        # sequenced batches in sequence order; those waiting for a new sequence (reset_sequence)
        # after them, in the order they had
        retries.sort(key=lambda b: (b.base_sequence < 0, b.base_sequence))
        q.clear()
        q.extend(retries)
        q.extend(fresh)

    def has_retries(self, tp: TopicPartition) -> bool:
        q = self.queues.get(tp)
        return bool(q) and q[0].is_retry  # type: ignore[index]

    def undrained(self) -> Iterator[ProducerBatch]:
        for q in self.queues.values():
            yield from q

    def drop_undrained(self, error: BaseException, only: TopicPartition | None = None) -> int:
        """Fail every batch still queued (of one partition, or all); returns how many."""
        n = 0
        for tp, q in self.queues.items():
            if only is not None and tp != only:
                continue
            while q:
                b = q.popleft()
                b.fail(error)
                self.released(b)
                n += 1
        return n
