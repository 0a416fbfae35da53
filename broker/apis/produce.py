"""Produce (0): validate each batch's header and CRC, append as it came, answer per partition.

The records of a client batch are never decoded here (docs/architecture.md): Partition.append
validates the batch headers and CRCs and stores the bytes as they came. acks=-1 then waits until
the partition's in-sync replicas have the batch (at once while the ISR is this broker alone).

A transactional batch that would open a transaction in a partition is first checked with the
transaction coordinator (KIP-890 part 1, Partition.needs_verification): a partition that is not
part of the producer's ongoing transaction is refused, so a zombie's late write — a produce delayed
in the network until after its transaction ended, or a producer that skipped AddPartitionsToTxn —
cannot land in the log. The question is Kafka's AddPartitionsToTxn v4 with verify_only=true
(TransactionCoordinator.verify_anywhere): asked directly when the coordinator is this broker, over
the inter-broker listener otherwise, with the same answers. What the producer is told is Kafka's
mapping (_FOR_PRODUCER, then wire_errors for the request's version):

    PRODUCER_FENCED                               -> INVALID_PRODUCER_EPOCH
    CONCURRENT_TRANSACTIONS, coordinator moving   -> NOT_ENOUGH_REPLICAS (retriable)
    not in the transaction (TRANSACTION_ABORTABLE) -> as it came from v11, INVALID_TXN_STATE before
    unknown producer id                           -> INVALID_TXN_STATE
    anything else (a timeout, a coordinator
    without metadata yet)                         -> as it came

The produce requests of one connection append in the order they came, as in Kafka (which handles
a connection's requests one at a time): a request whose verification answers sooner than an
earlier one's waits for the earlier one to append. Overtaking, it would put a producer's later
sequence in the log first, and the earlier batch would be refused OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import structlog

from protocol import batch as rb
from protocol.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.topic_partition import TopicPartition
from storage.faults import broken
from storage.log import AppendResult

from ..context import BrokerContext, ClientInfo
from ..partition import AppendOrigin
from ..topics import INTERNAL_TOPICS
from ..txn.wire_errors import for_version

if TYPE_CHECKING:
    from ..partition import Partition, VerificationGuard

KEY = 0
ORDERED = False
log = structlog.get_logger()

_FOR_PRODUCER = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_TXN_STATE,
}


def verdict_for_producer(code: ErrorCode, version: int) -> ErrorCode:
    """The coordinator's answer as a Produce `version` client is told it (the module docstring's
    table). Any other code goes as it came, as Kafka passes it on: defaulting to INVALID_TXN_STATE
    made a retriable answer -- UNKNOWN_TOPIC_OR_PARTITION from a coordinator without metadata yet,
    a timeout -- fatal for the producer (simulation seed 3507)."""
    return ErrorCode(for_version(_FOR_PRODUCER.get(code, code), KEY, version))


def append_to(ctx: BrokerContext, part: Partition, records: memoryview | bytes, transactional: bool,
              acks: int, guard: VerificationGuard | None = None) -> tuple[PartitionProduceResponse, AppendResult | None]:
    """Append through the partition, which validates client batches. Synchronous, so the appends
    of pipelined requests happen in the order the requests arrived."""
    try:
        res = part.append(records, AppendOrigin.CLIENT, acks, transactional=transactional, guard=guard)
    except KafkaError as e:
        ctx.metrics.produce_errors[e.code.name] += 1
        if e.code not in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH):
            log.info("produce rejected", topic=part.topic, partition=part.index, error=e.code.name,
                     reason=e.message)
        return PartitionProduceResponse(index=part.index, error_code=e.code, base_offset=-1,
                                        error_message=e.message or None,
                                        log_start_offset=part.log_start_offset), None
    m = ctx.metrics
    if res.duplicate:
        m.duplicate_batches += res.batches
    else:
        m.batches_produced += res.batches
        m.records_produced += res.last_offset - res.first_offset + 1
    return PartitionProduceResponse(index=part.index, error_code=0, base_offset=res.first_offset,
                                    log_append_time_ms=res.log_append_time,
                                    log_start_offset=res.log_start_offset), res


async def flushed(ctx: BrokerContext, resp: PartitionProduceResponse,
                  flush: asyncio.Future[None]) -> PartitionProduceResponse:
    """The answer once the flush the topic's flush policy asked for after this append ran
    (flush_messages=1: nothing acknowledged is lost to a power failure); KAFKA_STORAGE_ERROR
    if the disk refused it."""
    try:
        await flush
    except Exception as e:
        log.error("flush failed", error=repr(e))
        ctx.metrics.produce_errors[ErrorCode.KAFKA_STORAGE_ERROR.name] += 1
        return dataclasses.replace(resp, error_code=ErrorCode.KAFKA_STORAGE_ERROR)
    return resp


async def replicated(ctx: BrokerContext, part: Partition, res: AppendResult, resp: PartitionProduceResponse,
                     timeout_ms: int, flush: asyncio.Future[None] | None = None) -> PartitionProduceResponse:
    """acks=all: the answer once the in-sync replicas have the batch (or why they never will),
    and the flush policy's flush of it ran."""
    if flush is not None:
        resp = await flushed(ctx, resp, flush)
        if resp.error_code:
            return resp
    error = await part.replicated(res.last_offset + 1, max(timeout_ms, 0) / 1000)
    if not error:
        return resp
    ctx.metrics.produce_errors[error.name] += 1
    return dataclasses.replace(resp, error_code=error)


Verdicts = dict[TopicPartition, tuple[ErrorCode, "VerificationGuard"]]


def refusals(ctx: BrokerContext, client: ClientInfo, req: ProduceRequest) -> dict[str, ErrorCode]:
    """Topic -> why the requester may not write there (Kafka's checks): a transactional request
    needs WRITE on its transactional id (else every partition is refused), each topic WRITE."""
    authz = ctx.authorizer
    if not authz.enabled:
        return {}
    names = {td.name for td in req.topic_data}
    if req.transactional_id is not None and not authz.allows(client, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                              req.transactional_id):
        return dict.fromkeys(names, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return dict.fromkeys(names - authz.allowed(client, AclOperation.WRITE, ResourceType.TOPIC, names),
                         ErrorCode.TOPIC_AUTHORIZATION_FAILED)


async def _verify_transactional(ctx: BrokerContext, req: ProduceRequest, version: int,
                                refused: dict[str, ErrorCode]) -> Verdicts:
    """Coordinator verdicts for the partitions where a transactional batch opens a transaction,
    each with the guard its append must still hold."""
    guards: dict[TopicPartition, VerificationGuard] = {}
    by_producer: dict[tuple[int, int], list[TopicPartition]] = {}
    for td in req.topic_data:
        if td.name in refused:
            continue
        for pd in td.partition_data:
            part = ctx.topics.partition(td.name, pd.index)
            if part is None or not pd.records or len(pd.records) < rb.HEADER_SIZE:
                continue
            try:
                h = rb.read_header(pd.records)
            except (KafkaError, ValueError):
                continue  # check_batches rejects it with the right error
            if part.needs_verification(h):
                tp = TopicPartition(td.name, pd.index)
                guards[tp] = part.start_verification(h.producer_id, h.producer_epoch, h.base_sequence)
                by_producer.setdefault((h.producer_id, h.producer_epoch), []).append(tp)
    verdicts: Verdicts = {}
    assert req.transactional_id is not None
    for (pid, epoch), tps in by_producer.items():
        for tp in tps:
            code = await ctx.txn.verify_anywhere(req.transactional_id, pid, epoch, [tp])
            verdict = verdict_for_producer(code, version)
            if verdict == ErrorCode.INVALID_PRODUCER_EPOCH and broken("fence"):
                verdict = ErrorCode.NONE
            verdicts[tp] = (verdict, guards[tp])
    return verdicts


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ProduceRequest) -> ProduceResponse | None:
    bad_acks = req.acks not in (-1, 0, 1)
    transactional = req.transactional_id is not None
    earlier, appended = client.produce_appended, asyncio.get_running_loop().create_future()
    client.produce_appended = appended
    refused = refusals(ctx, client, req)
    try:
        verdicts = await _verify_transactional(ctx, req, header.api_version, refused) if transactional and not bad_acks else {}
        if earlier is not None and not earlier.done():
            await earlier
        responses, waits = _append_all(ctx, req, verdicts, transactional, bad_acks, refused)
    finally:
        if not appended.done():
            appended.set_result(None)
    if waits:
        done = await asyncio.gather(*(w for _, _, w in waits))
        for (parts, i, _), resp in zip(waits, done, strict=True):
            parts[i] = resp
    if req.acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


Waits = list[tuple[list[PartitionProduceResponse], int, Awaitable[PartitionProduceResponse]]]


def _append_all(ctx: BrokerContext, req: ProduceRequest, verdicts: Verdicts, transactional: bool, bad_acks: bool,
                refused: dict[str, ErrorCode]) -> tuple[list[TopicProduceResponse], Waits]:
    """Every partition's append (or refusal), without yielding to the loop: the answers, and what
    each appended partition still waits for (replication, flush) before it is answered."""
    responses = []
    waits: Waits = []
    for td in req.topic_data:
        name = td.name
        parts: list[PartitionProduceResponse] = []
        for pd in td.partition_data:
            part = ctx.topics.partition(name, pd.index)
            denied = refused.get(name)
            verdict, guard = verdicts.get(TopicPartition(name, pd.index), (ErrorCode.NONE, None))
            if denied is not None:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=denied, base_offset=-1))
            elif verdict:
                log.info("transactional produce refused by the coordinator check", topic=name, partition=pd.index,
                         transactional_id=req.transactional_id, error=verdict.name)
                parts.append(PartitionProduceResponse(index=pd.index, error_code=verdict, base_offset=-1,
                                                      error_message="partition is not in the producer's "
                                                      "ongoing transaction" if verdict in (ErrorCode.INVALID_TXN_STATE,
                                                                                      ErrorCode.TRANSACTION_ABORTABLE)
                                                      else None))
            elif bad_acks:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ErrorCode.INVALID_REQUIRED_ACKS,
                                                      base_offset=-1))
            elif part is None:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ctx.topics.missing(name, pd.index),
                                                      base_offset=-1))
            elif name in INTERNAL_TOPICS:
                # The coordinators' own logs: a client record there could stop the broker from
                # loading them (Kafka refuses these writes the same way).
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                      base_offset=-1, error_message="cannot write to an internal topic"))
            elif pd.records is None:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ErrorCode.CORRUPT_MESSAGE,
                                                      base_offset=-1, error_message="null record set"))
            else:
                resp, res = append_to(ctx, part, pd.records, transactional, req.acks, guard)
                flush = part.flush_wait if res is not None and req.acks != 0 else None
                if res is not None and req.acks == -1 and not broken("acks"):
                    waits.append((parts, len(parts), replicated(ctx, part, res, resp, req.timeout_ms, flush)))
                elif flush is not None:
                    waits.append((parts, len(parts), flushed(ctx, resp, flush)))
                parts.append(resp)
        responses.append(TopicProduceResponse(name=name, partition_responses=parts))
    return responses, waits
