"""Speaking the transactional APIs byte for byte (no client library in between), for the tests that
must control every field: error cases, hanging transactions, LSO and producer-state checks."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    ProducerState,
    TopicRequest,
)
from protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionState,
)
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch

from .raw import Raw
from .wait import wait_until

CONCURRENT_TRANSACTIONS = ErrorCode.CONCURRENT_TRANSACTIONS
COORDINATOR_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def txn_batch(
    pid: int, epoch: int, seq: int, n: int = 1, *, transactional: bool = True, value: bytes = b"v"
) -> bytes:
    return build_batch(
        [Record(i, 0, None, value + str(i).encode()) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


class RawTxn(Raw):
    """A Raw connection with one method per transactional request (tests assert the codes)."""

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        resp = self.request(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=-1,
                        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
                    )
                ],
                timeout_ms=5000,
            ),
            4,
        )
        assert isinstance(resp, CreateTopicsResponse) and resp.topics[0].error_code == 0, resp

    def init_pid(
        self, tid: str | None, timeout_ms: int = 60_000, *, version: int = 4, pid: int = -1, epoch: int = -1,
        enable_2pc: bool = False, keep_prepared: bool = False,
    ) -> InitProducerIdResponse:
        """InitProducerId; with `enable_2pc` or `keep_prepared` (KIP-939) at v6, which carries them."""
        if tid is not None:
            # as clients do: the coordinator is looked up first, which creates __transaction_state
            self.request(FindCoordinatorRequest(key=tid, key_type=1), 3)
        if enable_2pc or keep_prepared:
            version = 6
        resp = self.request(
            InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch,
                enable_2pc=enable_2pc, keep_prepared_txn=keep_prepared,
            ),
            version,
        )
        assert isinstance(resp, InitProducerIdResponse)
        return resp

    def init_ok(self, tid: str, timeout_ms: int = 60_000, *, enable_2pc: bool = False) -> tuple[int, int]:
        """InitProducerId until it succeeds or is refused for good (init_until_done)."""
        resp = self.init_until_done(tid, timeout_ms, enable_2pc=enable_2pc)
        assert resp.error_code == 0, resp
        return resp.producer_id, resp.producer_epoch

    def init_until_done(self, tid: str, timeout_ms: int = 60_000, *, enable_2pc: bool = False,
                        keep_prepared: bool = False) -> InitProducerIdResponse:
        """InitProducerId until it is not CONCURRENT_TRANSACTIONS (a previous instance's abort) or
        COORDINATOR_LOAD_IN_PROGRESS (a `__transaction_state` partition just created or moved,
        still loading: clients retry both); its answer, whatever it is."""

        def attempt() -> InitProducerIdResponse | None:
            r = self.init_pid(tid, timeout_ms, enable_2pc=enable_2pc, keep_prepared=keep_prepared)
            return None if r.error_code in (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS) else r

        return wait_until(attempt, timeout=15, message=f"InitProducerId for {tid}")

    def add_partitions(
        self, tid: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3
    ) -> dict[tuple[str, int], int]:
        resp = self.request(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[
                    AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in parts.items()
                ],
            ),
            version,
        )
        assert isinstance(resp, AddPartitionsToTxnResponse)
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        resp = self.request(
            AddOffsetsToTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
            ),
            version,
        )
        assert isinstance(resp, AddOffsetsToTxnResponse)
        return resp.error_code

    def produce(
        self, topic: str, partition: int, records: bytes, tid: str | None, version: int = 7
    ) -> tuple[int, int]:
        resp = self.request(
            ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(
                        name=topic, partition_data=[PartitionProduceData(index=partition, records=records)]
                    )
                ],
            ),
            version,
        )
        assert isinstance(resp, ProduceResponse)
        p = resp.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> EndTxnResponse:
        resp = self.request(
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
            version,
        )
        assert isinstance(resp, EndTxnResponse)
        return resp

    def latest(self, topic: str, partition: int, *, committed: bool) -> int:
        """ListOffsets latest: the LSO at read_committed, the high watermark otherwise."""
        resp = self.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=1 if committed else 0,
                topics=[
                    ListOffsetsTopic(
                        name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)]
                    )
                ],
            ),
            2,
        )
        assert isinstance(resp, ListOffsetsResponse)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0, p
        return p.offset

    def producers(self, topic: str, partition: int) -> list[ProducerState]:
        resp = self.request(
            DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[partition])]), 0
        )
        assert isinstance(resp, DescribeProducersResponse)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0, p
        return list(p.active_producers)

    def describe(self, tid: str) -> TransactionState:
        resp = self.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
        assert isinstance(resp, DescribeTransactionsResponse)
        return resp.transaction_states[0]

    def list_txns(
        self, states: list[str] | None = None, pids: list[int] | None = None, duration: int = -1
    ) -> ListTransactionsResponse:
        resp = self.request(
            ListTransactionsRequest(
                state_filters=states or [], producer_id_filters=pids or [], duration_filter=duration
            ),
            1,
        )
        assert isinstance(resp, ListTransactionsResponse)
        return resp


def create_topic_at(port: int, name: str, partitions: int) -> None:
    """CreateTopics through the broker at `port`, on a connection of its own."""
    raw = RawTxn(port)
    try:
        raw.create_topic(name, partitions)
    finally:
        raw.close()


def offset_at(port: int, group: str, topic: str, partition: int, *, require_stable: bool = False) -> tuple[int, int, int]:
    """OffsetFetch v7 of one partition from the broker at `port`: (top-level error, the partition's
    error, its committed offset)."""
    raw = RawTxn(port)
    try:
        resp = raw.request(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(
            name=topic, partition_indexes=[partition])], require_stable=require_stable), 7)
    finally:
        raw.close()
    assert isinstance(resp, OffsetFetchResponse)
    if resp.error_code or not resp.topics:
        return resp.error_code, resp.error_code, -1
    p = resp.topics[0].partitions[0]
    return 0, p.error_code, p.committed_offset
