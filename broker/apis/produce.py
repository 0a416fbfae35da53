"""Produce (0): validate each batch's header and CRC, append as it came, answer per partition.

The records of a client batch are never decoded here (design.md §2). On a single broker acks=-1
waits for nothing more than acks=1: the in-sync replica set is this broker alone; replication
will make acks=-1 wait for the ISR.

A transactional batch that would open a transaction in a partition is first checked with the
transaction coordinator (broker/txn/verification.py): a partition that is not part of the
producer's ongoing transaction is refused, so a zombie's late write cannot land in the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from protocol import batch as rb
from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.topic_partition import TopicPartition

from ..topics import INTERNAL_TOPICS
from ..txn import verification

if TYPE_CHECKING:
    from ..partition import Partition
    from ..server import BrokerServer, ClientInfo

KEY = 0
log = structlog.get_logger()


def check_batches(records: memoryview | bytes, max_message_bytes: int, transactional: bool) -> int:
    """Everything a broker checks before it stores client bytes; raises KafkaError. Returns the
    number of batches."""
    if not records:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
    n = 0
    for pos, h in rb.iter_batches(records, strict=True):
        n += 1
        size = h.size
        if size > max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes over max.message.bytes")
        rb.validate(records, pos, size, h)
        if h.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
        if h.is_transactional and not transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             "transactional batch in a produce request without a transactional id")
    return n


def produce_to(server: BrokerServer, part: Partition, records: memoryview | bytes,
               transactional: bool) -> PartitionProduceResponse:
    try:
        topic = server.topics.get(part.topic)
        max_bytes = int(topic.configs.get("max.message.bytes", server.cfg.message_max_bytes)) if topic else \
            server.cfg.message_max_bytes
        batches = check_batches(records, max_bytes, transactional)
        res = part.append(records)
    except KafkaError as e:
        server.metrics.produce_errors[e.code.name] += 1
        if e.code not in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH):
            log.info("produce rejected", topic=part.topic, partition=part.index, error=e.code.name,
                     reason=e.message)
        return PartitionProduceResponse(index=part.index, error_code=e.code, base_offset=-1,
                                        error_message=e.message or None, log_start_offset=part.log.log_start_offset)
    m = server.metrics
    if res.duplicate:
        m.duplicate_batches += batches
    else:
        m.batches_produced += batches
        m.records_produced += res.last_offset - res.first_offset + 1
    return PartitionProduceResponse(index=part.index, error_code=0, base_offset=res.first_offset,
                                    log_append_time_ms=res.log_append_time, log_start_offset=res.log_start_offset)


async def _verify_transactional(server: BrokerServer, req: ProduceRequest) -> dict[TopicPartition, ErrorCode]:
    """Coordinator verdicts for the partitions where a transactional batch opens a transaction."""
    by_producer: dict[tuple[int, int], list[TopicPartition]] = {}
    for td in req.topic_data:
        for pd in td.partition_data:
            part = server.topics.partition(td.name, pd.index)
            if part is None or not pd.records or len(pd.records) < rb.HEADER_SIZE:
                continue
            try:
                h = rb.read_header(pd.records)
            except (KafkaError, ValueError):
                continue  # check_batches rejects it with the right error
            if verification.needs_verification(part, h):
                by_producer.setdefault((h.producer_id, h.producer_epoch), []).append(TopicPartition(td.name, pd.index))
    verdicts: dict[TopicPartition, ErrorCode] = {}
    assert req.transactional_id is not None
    for (pid, epoch), tps in by_producer.items():
        verdicts.update(await verification.verify(server, req.transactional_id, pid, epoch, tps))
    return verdicts


async def handle(server: BrokerServer, client: ClientInfo, header: RequestHeader,
                 req: ProduceRequest) -> ProduceResponse | None:
    bad_acks = req.acks not in (-1, 0, 1)
    transactional = req.transactional_id is not None
    verdicts = await _verify_transactional(server, req) if transactional and not bad_acks else {}
    responses = []
    for td in req.topic_data:
        name = td.name
        parts = []
        for pd in td.partition_data:
            part = server.topics.partition(name, pd.index)
            refused = verdicts.get(TopicPartition(name, pd.index), ErrorCode.NONE)
            if refused:
                log.info("transactional produce refused by the coordinator check", topic=name, partition=pd.index,
                         transactional_id=req.transactional_id, error=refused.name)
                parts.append(PartitionProduceResponse(index=pd.index, error_code=refused, base_offset=-1,
                                                      error_message="partition is not in the producer's "
                                                      "ongoing transaction" if refused == ErrorCode.INVALID_TXN_STATE
                                                      else None))
            elif bad_acks:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ErrorCode.INVALID_REQUIRED_ACKS,
                                                      base_offset=-1))
            elif part is None:
                parts.append(PartitionProduceResponse(index=pd.index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
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
                parts.append(produce_to(server, part, pd.records, transactional))
        responses.append(TopicProduceResponse(name=name, partition_responses=parts))
    if req.acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
