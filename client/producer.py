"""The producer: send() queues a record and returns its delivery future; a sender task does the rest.

    async with Producer("localhost:9092") as p:
        meta = await p.send_and_wait("topic", b"value", key=b"key")

Idempotence is on by default (acks=all, a producer id, a sequence per batch), so a retried batch
is never written twice. With `transactional_id` the producer is transactional: see the
TransactionManager state machine in transactions.py; this module only carries its requests.
With `enable_2pc` as well its transactions take part in a two-phase commit (KIP-939):
`prepare_transaction()` flushes and returns a token, and `complete_transaction(token, commit)`
ends the transaction from this or any other instance with the same transactional id.

The sender task loops: find partitions whose first batch is ready (full, lingered long enough, a
flush or close in progress, or a retry whose backoff elapsed), group them by leader, and send one
ProduceRequest per leader with one batch per partition, without waiting for the answer (several
requests per connection are in flight). Per partition at most `max_in_flight` batches are in
flight; after a failure the partition's retried batches go out one at a time, in sequence order,
so an idempotent partition never sees a gap it would reject.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from protocol import compression as codecs
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.schema import Message

from .accumulator import BATCH_OVERHEAD, RECORD_OVERHEAD, Accumulator, ProducerBatch
from .cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, Cluster
from .errors import (
    ConnectionLostError,
    FatalError,
    IllegalStateError,
    KafkaClientError,
    KafkaTimeoutError,
    RetriableError,
    TransactionAbortableError,
    UnsupportedVersionError,
    error_from_code,
)
from .partitioner import DefaultPartitioner
from .security import Security
from .structs import ConsumerGroupMetadata, EncodedRecords, OffsetAndMetadata, RecordMetadata, TopicPartition
from .transactions import Outcome, PreparedTransaction, ProducerTxnState, Step, TransactionManager

TWO_PC_INIT_VERSION = 6  # InitProducerId carries Enable2Pc / KeepPreparedTxn from v6 (KIP-939)

_ACKS = {"all": -1, "-1": -1, -1: -1, 1: 1, "1": 1, 0: 0, "0": 0}
_SEQ_MASK = 0x7FFFFFFF
_SEQ_HALF = 1 << 30
# the broker has no (or other) sequence state for us: see Producer._recover_sequences
_LOST_SEQUENCE = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER})


# Brokers keep five batches per producer for deduplication (Kafka's ProducerStateEntry).
MAX_IDEMPOTENT_IN_FLIGHT = 5


async def _settled(*work: asyncio.Future[Any] | None) -> None:
    """Wait until each of `work` is done, however it ends. Not `gather`: a caller's timeout
    (flush(timeout), wait_for(commit_transaction(), t)) cancels the wait, and gather would pass
    that cancellation on to the batches' futures and the AddPartitionsToTxn task -- the next
    flush then raises CancelledError and the transaction cannot be committed again."""
    pending = [w for w in work if w is not None]
    if pending:
        await asyncio.wait(pending)


class Producer:
    """An asyncio Kafka producer. Use as `async with`, or call `start()` and `close()`."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str = "ketch-producer",
        acks: int | str = "all",
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        enable_2pc: bool = False,
        compression: str = "none",
        linger_ms: float = 5,
        batch_size: int = 16_384,
        max_request_size: int = 1_048_576,
        buffer_memory: int = 32 * 1024 * 1024,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 100,
        max_in_flight: int = 5,
        max_block_ms: int = 60_000,
        partitioner: DefaultPartitioner | None = None,
        clock: Clock = SYSTEM_CLOCK,
        security: Security | None = None,
    ) -> None:
        if acks not in _ACKS:
            raise ValueError(f"acks must be 'all', 1 or 0, not {acks!r}")
        self.acks = _ACKS[acks]
        if enable_2pc and transactional_id is None:
            raise ValueError("two-phase commit (enable_2pc) needs a transactional_id")
        if transactional_id is not None:
            if enable_idempotence is False:
                raise ValueError("a transactional producer is idempotent: enable_idempotence cannot be False")
            enable_idempotence = True
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if enable_idempotence is None:
            # Kafka 3.x: on by default unless a setting conflicts with it.
            enable_idempotence = self.acks == -1 and max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT
        if enable_idempotence and self.acks != -1:
            raise ValueError("idempotence needs acks='all'")
        if enable_idempotence and max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
            # The broker deduplicates against the last five batches of each producer: a sixth in
            # flight could be retried after it left that window and be written twice.
            raise ValueError(f"max_in_flight must be at most {MAX_IDEMPOTENT_IN_FLIGHT} to use the idempotent "
                             f"producer, not {max_in_flight}")
        if compression not in codecs.BY_NAME:
            raise ValueError(f"compression must be one of {sorted(codecs.BY_NAME)}, not {compression!r}")
        self.idempotent = enable_idempotence
        self.transactional_id = transactional_id
        self.compression = codecs.BY_NAME[compression]
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.request_timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.max_in_flight = max_in_flight
        self.max_block = max_block_ms / 1000
        self._cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout=self.request_timeout,
                                retry_backoff=self.retry_backoff, clock=clock, security=security)
        self._clock = clock
        self._acc = Accumulator(batch_size, linger_ms / 1000, delivery_timeout_ms / 1000, clock)
        self._partitioner = partitioner or DefaultPartitioner()
        self.txn: TransactionManager | None = (
            TransactionManager(transactional_id, transaction_timeout_ms, enable_2pc=enable_2pc)
            if transactional_id is not None else None)
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_seq: dict[TopicPartition, int] = defaultdict(int)
        # the (producer id, epoch) each partition's sequences belong to: a partition moves to a new
        # epoch (and restarts at sequence 0) only once nothing of the old one is in flight
        self._seq_owner: dict[TopicPartition, tuple[int, int]] = {}
        # the (producer id, epoch) of which each partition has acknowledged a batch: until it has,
        # its leader may not know the producer and would take any sequence as its first (KIP-360),
        # so a later batch must not overtake the first one, which goes alone
        self._acked_owner: dict[TopicPartition, tuple[int, int]] = {}
        # KIP-360 recovery of the idempotent producer: partitions whose unacknowledged batches must
        # be re-sequenced under a new epoch, and whether that epoch is still to be fetched
        self._rewrite: set[TopicPartition] = set()
        self._bump_needed = False
        self._bump_task: asyncio.Task[None] | None = None
        self._in_flight: dict[TopicPartition, int] = defaultdict(int)
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._flushing = 0
        self._closing = False
        self._started = False
        self._sender: asyncio.Task[None] | None = None
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._md_task: asyncio.Task[None] | None = None
        self._add_task: asyncio.Task[None] | None = None
        self._pid_task: asyncio.Task[None] | None = None
        self._fatal: KafkaClientError | None = None
        self._topics: dict[str, tuple[int, list[TopicPartition]]] = {}  # see send()
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect and fetch metadata (fails fast on a wrong bootstrap address)."""
        if self._started:
            return
        await self._cluster.refresh_metadata()
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._sender = self._loop.create_task(self._send_loop())

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued (within `timeout`), then stop. Undelivered records fail."""
        if not self._started:
            await self._cluster.close()
            return
        if not self._closing:
            self._closing = True
            self._wake.set()
            try:
                await asyncio.wait_for(self._wait_incomplete(), timeout if timeout is not None else self.max_block)
            except TimeoutError:
                pass
        self._started = False
        self._wake.set()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t
        self._acc.drop_undrained(KafkaClientError("producer closed before the record was sent"))
        for b in list(self._acc.incomplete):
            b.fail(KafkaClientError("producer closed before the record was acknowledged"))
            self._acc.released(b)
        await self._cluster.close()
        self._started = False

    def _check_usable(self) -> None:
        if not self._started:
            raise IllegalStateError("producer not started: use `async with Producer(...)` or await start()")
        if self._closing:
            raise IllegalStateError("producer is closed")
        if self._fatal is not None:
            raise self._fatal

    # ------------------------------------------------------------------ sending
    async def send(self, topic: str, value: bytes | None = None, *, key: bytes | None = None,
                   partition: int | None = None, headers: Sequence[tuple[str, bytes | None]] | None = None,
                   timestamp_ms: int | None = None) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns the future of its RecordMetadata (await it for the ack).

        Waits only for metadata of a new topic and when `buffer_memory` is full. In a transactional
        producer the record belongs to the open transaction (begin_transaction first).

        This runs once per record, so the common case (started, known topic, room in the buffer)
        is kept to a few lookups: the topic's partition count and TopicPartition objects are
        cached per metadata version instead of being rebuilt for every record.
        """
        if not self._started or self._closing or self._fatal is not None:
            self._check_usable()
        cached = self._topics.get(topic)
        if cached is None or cached[0] != self._cluster.metadata_version:
            cached = await self._topic_partitions(topic)
        tps = cached[1]
        n = len(tps)
        if partition is None:
            partition = self._partitioner.partition(topic, key, n)
        elif not 0 <= partition < n:
            raise ValueError(f"partition {partition} out of range for {topic} ({n} partitions)")
        size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            headers = tuple(headers)
            for hk, hv in headers:
                size += len(hk) + (len(hv) if hv else 0) + 4
        else:
            headers = ()
        if size + BATCH_OVERHEAD > self.max_request_size:
            raise error_from_code(ErrorCode.MESSAGE_TOO_LARGE, f"record of {size} bytes > max_request_size")
        tp = tps[partition]
        await self._admit(tp, size)
        if timestamp_ms is None:
            timestamp_ms = self._clock.now_ms()
        loop = self._loop
        assert loop is not None  # set by start(), which _check_usable demanded
        fut, new, full = self._acc.append(tp, (key, value, headers, timestamp_ms), size, loop)
        if full:
            self._partitioner.batch_done(topic, partition, n)
            self._wake.set()
        elif new or (self.txn is not None and self.txn.has_partitions_to_add):
            self._wake.set()  # a new batch: the sender must start its linger timer
        return fut

    async def _admit(self, tp: TopicPartition, size: int) -> None:
        """What a record (or a framed batch) must have before it is queued: its partition in the
        transaction, and room in buffer_memory."""
        if self.txn is not None:
            self.txn.add_partition(tp)
        if self._acc.buffered_bytes + size > self.buffer_memory:
            await self._wait_for_space(size)

    async def send_batch(self, topic: str, partition: int, records: EncodedRecords) -> asyncio.Future[RecordMetadata]:
        """Queue records the caller framed already (client/arrow.py builds them from Arrow columns)
        as one batch of their own; returns one future, for where the first of them was written.

        Everything else is as for send(): the same sequences, retries, transaction and buffer
        limit. The caller chooses the partition (client/arrow.py partitions keys as send() does)
        and keeps the section under max_request_size.
        """
        if not self._started or self._closing or self._fatal is not None:
            self._check_usable()
        cached = self._topics.get(topic)
        if cached is None or cached[0] != self._cluster.metadata_version:
            cached = await self._topic_partitions(topic)
        tps = cached[1]
        if not 0 <= partition < len(tps):
            raise ValueError(f"partition {partition} out of range for {topic} ({len(tps)} partitions)")
        size = len(records.section)
        if size + BATCH_OVERHEAD > self.max_request_size:
            raise error_from_code(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes > max_request_size")
        tp = tps[partition]
        await self._admit(tp, size)
        loop = self._loop
        assert loop is not None
        fut = self._acc.append_framed(tp, records, size, loop)
        self._wake.set()
        return fut

    async def _topic_partitions(self, topic: str) -> tuple[int, list[TopicPartition]]:
        """(metadata version, one TopicPartition per partition) of `topic`, waiting for its metadata."""
        n = self._cluster.partitions_for(topic)
        if n is None:
            n = await self._cluster.wait_for_topic(topic, self.max_block)
        cached = (self._cluster.metadata_version, [TopicPartition(topic, p) for p in range(n)])
        self._topics[topic] = cached
        return cached

    async def _wait_for_space(self, size: int) -> None:
        while self._acc.buffered_bytes + size > self.buffer_memory and self._acc.incomplete:
            self._space.clear()
            self._wake.set()
            try:
                await asyncio.wait_for(self._space.wait(), self.max_block)
            except TimeoutError:
                raise KafkaTimeoutError(f"buffer_memory full for {self.max_block}s") from None

    async def send_and_wait(self, topic: str, value: bytes | None = None, **kw: Any) -> RecordMetadata:
        """send() and wait for the acknowledgement."""
        return await (await self.send(topic, value, **kw))

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each of those records is acknowledged or failed."""
        self._check_started()
        self._flushing += 1
        self._wake.set()
        try:
            await asyncio.wait_for(self._wait_incomplete(), timeout)
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout}s") from None
        finally:
            self._flushing -= 1

    def _check_started(self) -> None:
        if not self._started:
            raise IllegalStateError("producer not started")

    async def _wait_incomplete(self) -> None:
        await _settled(*(b.done for b in self._acc.incomplete))

    async def partitions_for(self, topic: str) -> list[int]:
        return list(range(await self._cluster.wait_for_topic(topic, self.max_block)))

    # ------------------------------------------------------------------ the sender
    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks[t] = None
        t.add_done_callback(lambda done: self._tasks.pop(done, None))
        return t

    async def _send_loop(self) -> None:
        while self._started:  # a flag as well as cancellation: 3.11's wait_for may swallow a cancel
            delay = self._run_once()
            self._wake.clear()
            try:
                if delay is None:
                    await self._wake.wait()
                else:
                    async with asyncio.timeout(max(delay, 0.0005)):  # 3.11's wait_for: a task per wait
                        await self._wake.wait()
            except TimeoutError:
                pass

    def _needs_producer_id(self) -> bool:
        return self.idempotent and self.txn is None and self._producer_id < 0

    def _run_once(self) -> float | None:
        """One pass of the sender; returns how long it may sleep (None: until woken)."""
        now = self._clock.monotonic()
        txn = self.txn
        if self._needs_producer_id():
            if self._pid_task is None or self._pid_task.done():
                self._pid_task = self._spawn(self._init_idempotent())
            return None
        if self._bump_needed:
            # nothing goes out until every in-flight batch has its answer and the new epoch is here
            if not any(self._in_flight.values()) and (self._bump_task is None or self._bump_task.done()):
                self._bump_task = self._spawn(self._bump_epoch())
            return None
        owner = self._pid_epoch()
        if txn is not None:
            if txn.state in (ProducerTxnState.ABORTABLE_ERROR, ProducerTxnState.FATAL_ERROR):
                # partitions that never made it into the transaction cannot be sent; fail their batches
                err = txn.last_error or TransactionAbortableError("transaction failed")
                for tp in list(self._acc.queues):
                    if not txn.is_sendable(tp):
                        self._acc.drop_undrained(err, only=tp)
                self._space.set()
            elif txn.has_partitions_to_add and (self._add_task is None or self._add_task.done()):
                self._add_task = self._spawn(self._add_partitions())
        urgent = self._flushing > 0 or self._closing
        linger = self._acc.linger
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        wake: float | None = None
        need_metadata = False
        for tp, q in self._acc.queues.items():
            if not q:
                continue
            first = q[0]
            if now >= first.deadline and not first.is_retry:
                self._expire(tp, q, now)
                if not q:
                    continue
                first = q[0]
            if txn is not None and not txn.is_sendable(tp):
                continue
            inflight = self._in_flight[tp]
            if first.is_retry:
                if inflight:
                    continue  # retries go one at a time, in order
                if now < first.retry_at:
                    wake = first.retry_at - now if wake is None else min(wake, first.retry_at - now)
                    continue
            elif inflight >= self.max_in_flight:
                continue
            elif inflight and self.idempotent and self._seq_owner.get(tp, owner) != owner:
                continue  # the first batch of a new epoch waits for the old epoch's batches
            elif inflight and self.idempotent and self._acked_owner.get(tp) != owner:
                continue  # the epoch's first batch here is unanswered: nothing may overtake it
            elif not (first.closed or len(q) > 1 or urgent or now - first.created >= linger):
                due = first.created + linger - now
                wake = due if wake is None else min(wake, due)
                continue
            leader = self._cluster.leader_for(tp)
            if leader is None:
                need_metadata = True
                continue
            by_node[leader].append(tp)
        if need_metadata:
            self._refresh_metadata_soon()
            wake = self.retry_backoff if wake is None else min(wake, self.retry_backoff)
        for node, tps in by_node.items():
            batches = [self._drain(tp) for tp in tps]
            self._spawn(self._produce(node, batches))
        return wake

    def _expire(self, tp: TopicPartition, q: Any, now: float) -> None:
        while q and now >= q[0].deadline and not q[0].is_retry:
            b = self._acc.pop(tp)
            err = KafkaTimeoutError(f"record for {tp.topic}-{tp.partition} not sent within delivery_timeout")
            b.fail(err)
            self._acc.released(b)
            if self.txn is not None:
                self.txn.on_produce_failure(err, sequenced=False)
        self._space.set()

    def _drain(self, tp: TopicPartition) -> ProducerBatch:
        b = self._acc.pop(tp)
        n = self._cluster.partitions_for(tp.topic)
        if n is not None and not b.is_retry:
            self._partitioner.batch_done(tp.topic, tp.partition, n)
        if b.encoded is None:
            pid, epoch = self._pid_epoch()
            seq = -1
            if self.idempotent:
                if self._seq_owner.get(tp) != (pid, epoch):
                    # sequences are per producer id and epoch: a new one (init, the bump at the end
                    # of each transaction with EndTxn v5, a KIP-360 recovery) starts again at 0
                    self._seq_owner[tp] = (pid, epoch)
                    self._next_seq[tp] = 0
                seq = self._next_seq[tp]
                self._next_seq[tp] = (seq + b.count) & _SEQ_MASK
            b.encode(producer_id=pid if self.idempotent else -1, producer_epoch=epoch if self.idempotent else -1,
                     base_sequence=seq, transactional=self.txn is not None, compression=self.compression)
        b.attempts += 1
        self._in_flight[tp] += 1
        return b

    def _pid_epoch(self) -> tuple[int, int]:
        if self.txn is not None:
            return self.txn.producer_id, self.txn.producer_epoch
        return self._producer_id, self._producer_epoch

    def _refresh_metadata_soon(self) -> None:
        if self._md_task is None or self._md_task.done():
            async def refresh() -> None:
                with contextlib.suppress(KafkaClientError):
                    await self._cluster.refresh_metadata()
                self._wake.set()
            self._md_task = self._spawn(refresh())

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list[PartitionProduceData]] = defaultdict(list)
        for b in batches:
            by_topic[b.tp.topic].append(PartitionProduceData(index=b.tp.partition, records=b.encoded))
        req = ProduceRequest(transactional_id=self.transactional_id, acks=self.acks,
                             timeout_ms=int(self.request_timeout * 1000),
                             topic_data=[TopicProduceData(name=t, partition_data=ps) for t, ps in by_topic.items()])
        try:
            conn = await self._cluster.connection(node)
            resp: ProduceResponse | None = await conn.request(req, expect_response=self.acks != 0)
        except (RetriableError, OSError, TimeoutError) as e:
            err = e if isinstance(e, KafkaClientError) else ConnectionLostError(repr(e))
            for b in batches:
                self._retry_or_fail(b, err, code=None)
            self._refresh_metadata_soon()
            self._wake.set()
            return
        except KafkaClientError as e:
            for b in batches:
                self._finish_failed(b, e)
            self._wake.set()
            return
        if resp is None:  # acks=0
            for b in batches:
                self._finish_ok(b, -1, -1)
            self._wake.set()
            return
        results = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        for b in batches:
            p = results.get((b.tp.topic, b.tp.partition))
            if p is None:
                self._retry_or_fail(b, ConnectionLostError("partition missing from ProduceResponse"), code=None)
                continue
            code = p.error_code
            if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._finish_ok(b, p.base_offset, p.log_append_time_ms)
                continue
            ec = ErrorCode(code)
            perr = error_from_code(code, p.error_message or f"produce to {b.tp.topic}-{b.tp.partition}")
            if ec in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH):
                self._refresh_metadata_soon()
            if ec in _LOST_SEQUENCE and b.base_sequence >= 0:
                if ec is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._earlier_unresolved(b):
                    self._retry_or_fail(b, perr, code=code)  # our own gap: it closes when that one lands
                elif self.txn is None:
                    self._recover_sequences(b, perr, code)
                else:
                    self._finish_failed(b, perr, code)  # abortable; the abort bumps the epoch
            elif ec.retriable:
                self._retry_or_fail(b, perr, code=code)
            else:
                self._finish_failed(b, perr, code)
        self._wake.set()

    def _earlier_unresolved(self, b: ProducerBatch) -> bool:
        """Is a batch before `b` of the same partition and epoch still unanswered (in flight, or
        queued for a retry)? Then the broker's gap complaint about `b` is our own doing, and `b`
        will fit once its predecessor lands."""
        for x in self._acc.incomplete:
            if (x is not b and x.tp == b.tp and x.base_sequence >= 0 and x.producer_id == b.producer_id
                    and x.producer_epoch == b.producer_epoch
                    and 0 < (b.base_sequence - x.base_sequence) & _SEQ_MASK < _SEQ_HALF):
                return True
        return False

    def _recover_sequences(self, b: ProducerBatch, err: KafkaClientError, code: int) -> None:
        """KIP-360 for the idempotent producer: the broker lost our state for the partition
        (UNKNOWN_PRODUCER_ID) or has a gap we did not cause (a batch before `b` failed for good, so
        OUT_OF_ORDER_SEQUENCE_NUMBER). Nothing from `b` on was written, so it is safe to send it
        again under a new epoch, from sequence 0; the bump waits until nothing is in flight."""
        self._in_flight[b.tp] -= 1
        if self._clock.monotonic() >= b.deadline or self._fatal is not None:
            self._fail_batch(b, err, code)
            return
        self._rewrite.add(b.tp)
        self._bump_needed = True
        self._acc.reenqueue(b, self._clock.monotonic())

    def _retry_or_fail(self, b: ProducerBatch, err: KafkaClientError, code: int | None) -> None:
        self._in_flight[b.tp] -= 1
        if self._clock.monotonic() < b.deadline and not self._fatal and not (
                self.txn is not None and self.txn.state is ProducerTxnState.FATAL_ERROR):
            self._acc.reenqueue(b, self._clock.monotonic() + self.retry_backoff)
            return
        self._fail_batch(b, err if not isinstance(err, RetriableError) else KafkaTimeoutError(
            f"delivery to {b.tp.topic}-{b.tp.partition} timed out; last error: {err}"), code)

    def _finish_ok(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._in_flight[b.tp] -= 1
        if b.base_sequence >= 0:
            self._acked_owner[b.tp] = (b.producer_id, b.producer_epoch)
        b.complete(base_offset, log_append_time)
        self._acc.released(b)
        self._space.set()

    def _finish_failed(self, b: ProducerBatch, err: KafkaClientError, code: int | None = None) -> None:
        self._in_flight[b.tp] -= 1
        self._fail_batch(b, err, code)

    def _fail_batch(self, b: ProducerBatch, err: KafkaClientError, code: int | None) -> None:
        if self.txn is not None:
            if code is not None:
                err = self.txn.on_produce_error(code, b.tp)
            else:
                self.txn.on_produce_failure(err)
        elif code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            self._fatal = FatalError(str(err), code)
        b.fail(err)
        self._acc.released(b)
        self._space.set()

    async def _bump_epoch(self) -> None:
        """A new epoch (or producer id) for the idempotent producer: InitProducerId v3+ with the
        current id and epoch, as librdkafka does (Java bumps the epoch locally; the broker accepts
        both). Kafka and Ketch answer an idempotent producer with a fresh producer id, epoch 0.
        Then the partitions that lost their sequences are re-sequenced from 0; every other
        partition moves to the new id when its in-flight batches are done."""
        deadline = self._clock.monotonic() + self.max_block
        while True:
            try:
                conn = await self._cluster.any_connection()
                v = conn.version_for(InitProducerIdRequest)
                req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                            producer_id=self._producer_id if v >= 3 else -1,
                                            producer_epoch=self._producer_epoch if v >= 3 else -1)
                resp: InitProducerIdResponse = await conn.request(req, version=v)
                if resp.error_code == 0:
                    self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
                    break
                if not ErrorCode(resp.error_code).retriable:
                    self._fail_all(FatalError("InitProducerId (epoch bump) failed", resp.error_code))
                    return
            except (RetriableError, OSError, TimeoutError):
                pass
            if self._clock.monotonic() > deadline:
                self._fail_all(KafkaTimeoutError("could not bump the producer epoch"))
                return
            await asyncio.sleep(self.retry_backoff)
        for tp in self._rewrite:
            for b in self._acc.queues.get(tp, ()):
                b.reset_sequence()  # encoded again, under the new epoch, at its next drain
            self._seq_owner.pop(tp, None)
        self._rewrite.clear()
        self._bump_needed = False
        self._wake.set()

    def _fail_all(self, err: KafkaClientError) -> None:
        """The producer cannot go on: every record not yet acknowledged fails with `err`."""
        self._fatal = err
        self._bump_needed = False
        self._acc.drop_undrained(err)
        self._space.set()

    async def _init_idempotent(self) -> None:
        """InitProducerId without a transactional id: any broker hands out a producer id."""
        deadline = self._clock.monotonic() + self.max_block
        while True:
            try:
                resp: InitProducerIdResponse = await self._cluster.request_any(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
                if resp.error_code == 0:
                    self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
                    self._wake.set()
                    return
                if not ErrorCode(resp.error_code).retriable:
                    self._fatal = FatalError("InitProducerId failed", resp.error_code)
                    self._acc.drop_undrained(self._fatal)
                    return
            except (RetriableError, OSError, TimeoutError):
                pass
            if self._clock.monotonic() > deadline:
                self._fatal = KafkaTimeoutError("could not get a producer id")
                self._acc.drop_undrained(self._fatal)
                return
            await asyncio.sleep(self.retry_backoff)

    # ------------------------------------------------------------------ transactions
    def _require_txn(self) -> TransactionManager:
        if self.txn is None:
            raise IllegalStateError("not a transactional producer: pass transactional_id=...")
        self._check_started()
        return self.txn

    async def _txn_call(self, key: str, key_type: int, build: Any, handle: Any, what: str, *,
                        min_version: int = 0) -> None:
        """Send a transactional request to its coordinator until the state machine says done.
        A coordinator that cannot take it at `min_version` at least is an error, not a retry."""
        deadline = self._clock.monotonic() + self.max_block
        while True:
            decision: Step
            try:
                node = await self._cluster.coordinator(key, key_type, timeout=max(0.1, deadline - self._clock.monotonic()))
                req = build()
                conn = await self._cluster.connection(node)
                version = conn.version_for(type(req))
                if version < min_version:
                    raise UnsupportedVersionError(
                        f"{what}: the coordinator speaks {type(req).__name__} up to v{version}; v{min_version} is "
                        "needed (two-phase commit, KIP-939)")
                resp = await conn.request(req, version=version)
                decision = handle(resp)
            except (RetriableError, OSError, TimeoutError):
                decision = Step(Outcome.FIND_COORDINATOR)
            if decision.outcome is Outcome.DONE:
                return
            if decision.outcome is Outcome.FAILED:
                assert decision.error is not None
                raise decision.error
            if decision.outcome is Outcome.FIND_COORDINATOR:
                self._cluster.forget_coordinator(key, key_type)
            if self._clock.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{what} did not complete within {self.max_block}s")
            await asyncio.sleep(self.retry_backoff)

    async def init_transactions(self, keep_prepared: bool = False) -> PreparedTransaction | None:
        """Get a producer id and epoch for the transactional id, fencing any older producer with
        it and letting the coordinator finish (abort) what such a producer left open.

        With `keep_prepared` (KIP-939) a two-phase-commit transaction left open is kept instead,
        and returned: this producer then holds it (PREPARED_TRANSACTION) and may only commit or
        abort it (`complete_transaction`). None when nothing was open."""
        txn = self._require_txn()
        req = txn.begin_init(keep_prepared=keep_prepared)

        def handle(resp: InitProducerIdResponse) -> Step:
            return txn.handle_init(resp.error_code, resp.producer_id, resp.producer_epoch,
                                   ongoing_producer_id=resp.ongoing_txn_producer_id,
                                   ongoing_producer_epoch=resp.ongoing_txn_producer_epoch)

        await self._txn_call(txn.transactional_id, COORDINATOR_TRANSACTION, lambda: req, handle, "init_transactions",
                             min_version=TWO_PC_INIT_VERSION if txn.needs_2pc_version else 0)
        self._next_seq.clear()
        self._seq_owner.clear()
        return txn.prepared

    async def begin_transaction(self) -> None:
        self._require_txn().begin()

    async def _add_partitions(self) -> None:
        txn = self.txn
        assert txn is not None
        req = txn.take_partitions_to_add()
        if req is None:
            return

        def handle(resp: Any) -> Step:
            results = {TopicPartition(t.name, p.partition_index): p.partition_error_code
                       for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}
            return txn.handle_add_partitions(results)

        def build() -> Message:
            return txn.add_partitions_request()

        try:
            await self._txn_call(txn.transactional_id, COORDINATOR_TRANSACTION, build, handle, "AddPartitionsToTxn")
        except KafkaTimeoutError as e:
            txn.abortable(e)
        except KafkaClientError:
            pass  # the state machine recorded it; the sender fails the stranded batches
        finally:
            self._wake.set()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit consumer offsets as part of the transaction: they become visible to the group
        only if the transaction commits. Pass `consumer.group_metadata()` so a consumer that was
        fenced by a rebalance cannot commit."""
        txn = self._require_txn()
        group = group_metadata if isinstance(group_metadata, ConsumerGroupMetadata) else ConsumerGroupMetadata(
            group_metadata)
        oms = {tp: (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)) for tp, o in offsets.items()}
        req = txn.begin_add_offsets(group)
        await self._txn_call(txn.transactional_id, COORDINATOR_TRANSACTION, lambda: req,
                             lambda r: txn.handle_add_offsets(r.error_code), "AddOffsetsToTxn")

        def handle(resp: Any) -> Step:
            return txn.handle_txn_offset_commit({TopicPartition(t.name, p.partition_index): p.error_code
                                                 for t in resp.topics for p in t.partitions})

        await self._txn_call(group.group_id, COORDINATOR_GROUP, lambda: txn.txn_offset_commit_request(oms, group),
                             handle, "TxnOffsetCommit")

    async def prepare_transaction(self) -> PreparedTransaction:
        """Phase one of a two-phase commit (KIP-939; needs enable_2pc): wait until every record of
        the transaction is acknowledged, then hand out the token that names it. Nothing more may
        join it; the broker keeps it, whatever its timeout, until this producer or another
        instance with the token ends it (`complete_transaction`). Raises
        TransactionAbortableError if any record failed (call abort_transaction)."""
        txn = self._require_txn()
        txn.raise_if_failed()
        if not txn.enable_2pc:
            raise IllegalStateError("prepare_transaction needs a two-phase-commit producer (enable_2pc=True)")
        if txn.state is not ProducerTxnState.IN_TRANSACTION:
            raise IllegalStateError(f"prepare_transaction needs IN_TRANSACTION, not {txn.state.name}")
        await self._settle_transaction()
        return txn.prepare()

    async def complete_transaction(self, token: PreparedTransaction, commit: bool = True) -> bool:
        """Phase two: commit (or abort) the prepared transaction `token` names — from the producer
        that prepared it, or from any other instance with its transactional id, in another
        process perhaps (this one initialises with KeepPreparedTxn first, fencing the instance
        that wrote it). True when it was ended so; False when no transaction was open any more
        (it was ended before: completed by someone, or aborted by a producer that initialised
        without keeping it). A different transaction open under the id is not touched: that
        raises IllegalStateError, and this producer holds it (commit or abort it explicitly)."""
        txn = self._require_txn()
        if token.transactional_id != txn.transactional_id:
            raise ValueError(f"the token is for transactional id {token.transactional_id!r}, this producer's is "
                             f"{txn.transactional_id!r}")
        if txn.state is ProducerTxnState.UNINITIALIZED:
            await self.init_transactions(keep_prepared=True)
        if txn.state is ProducerTxnState.READY:
            return False
        if txn.state is not ProducerTxnState.PREPARED_TRANSACTION:
            raise IllegalStateError(f"complete_transaction needs a prepared transaction, not {txn.state.name}")
        if txn.prepared != token:
            raise IllegalStateError(f"transactional id {txn.transactional_id!r} has another transaction open "
                                    f"({txn.prepared}), not the token's ({token})")
        if commit:
            await self.commit_transaction()
        else:
            await self.abort_transaction()
        return True

    async def _settle_transaction(self) -> None:
        """Everything sent and acknowledged, every partition added (or the transaction failed)."""
        await self.flush()
        await _settled(self._add_task)
        assert self.txn is not None
        self.txn.raise_if_failed()

    async def commit_transaction(self) -> None:
        """Wait until every record of the transaction is acknowledged, then commit it. Raises
        TransactionAbortableError if any of them failed (call abort_transaction). A prepared
        transaction (two-phase commit) is committed as it is."""
        txn = self._require_txn()
        txn.raise_if_failed()
        if txn.state not in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.PREPARED_TRANSACTION):
            raise IllegalStateError(f"commit_transaction needs IN_TRANSACTION, not {txn.state.name}")
        await self.flush()
        await _settled(self._add_task)
        if not txn.begin_commit():
            txn.complete()
            return
        await self._end_txn(txn, "commit_transaction")

    async def abort_transaction(self) -> None:
        """Drop what is not sent yet, wait for what is in flight, and abort the transaction."""
        txn = self._require_txn()
        need = txn.begin_abort()
        self._acc.drop_undrained(TransactionAbortableError("transaction aborted before the record was sent"))
        self._space.set()
        if self._add_task is not None:
            await _settled(self._add_task)
            need = txn.transaction_started
        await self._wait_incomplete()
        if not need:
            txn.complete()
        else:
            await self._end_txn(txn, "abort_transaction")
        if txn.state is ProducerTxnState.INITIALIZING:
            # a failed batch left the sequences in doubt and EndTxn (before v5) kept the epoch:
            # bump it now, so the next transaction starts every partition at sequence 0
            def handle(resp: InitProducerIdResponse) -> Step:
                return txn.handle_init(resp.error_code, resp.producer_id, resp.producer_epoch)

            await self._txn_call(txn.transactional_id, COORDINATOR_TRANSACTION, txn.bump_request, handle,
                                 "abort_transaction (epoch bump)")

    async def _end_txn(self, txn: TransactionManager, what: str) -> None:
        def handle(resp: Any) -> Step:
            return txn.handle_end_txn(resp.error_code, resp.producer_id, resp.producer_epoch)

        await self._txn_call(txn.transactional_id, COORDINATOR_TRANSACTION, txn.end_txn_request, handle, what)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """`async with producer.transaction(): ...` begins, then commits, or aborts on an exception.

        A fatal error (fenced producer) is raised as is, without an abort attempt: such a producer
        can do nothing but close.
        """
        txn = self._require_txn()
        await self.begin_transaction()
        try:
            yield self
        except BaseException:
            if txn.state not in (ProducerTxnState.FATAL_ERROR, ProducerTxnState.READY):
                with contextlib.suppress(KafkaClientError):
                    await self.abort_transaction()
            raise
        try:
            await self.commit_transaction()
        except TransactionAbortableError:
            await self.abort_transaction()
            raise

    @property
    def transaction_state(self) -> ProducerTxnState | None:
        return self.txn.state if self.txn is not None else None
