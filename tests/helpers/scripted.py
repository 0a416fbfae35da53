"""A scripted Kafka peer for client tests: answers that a real broker gives too rarely to test.

COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR or UNKNOWN_PRODUCER_ID come
from a real broker only in narrow windows (a coordinator loading its partition, a transaction
still completing, a broker that forgot a producer). To show that the client retries them, and how
often, the client talks to this peer instead: an asyncio TCP server that decodes every request
with the real `protocol/` codecs and answers with real response bodies, so the client's framing,
version negotiation and decoding are exercised exactly as against a broker.

The peer behaves like a one-node cluster (node 0, itself) with minimal state (topics, producer
ids, a log per partition, one group) and answers success by default. A test scripts failures per
API with `fail(RequestClass, code, ...)`: the next requests of that API get those error codes, in
order, then success again. Every decoded request is kept in `requests`, so a test can assert
how many attempts the client made and what it sent.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.headers import read_request_header, response_header_flexible, write_response_header
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from protocol.messages.end_txn import EndTxnResponse
from protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember
from protocol.messages.leave_group import LeaveGroupResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from protocol.messages.registry import REQUESTS
from protocol.messages.sync_group import SyncGroupResponse
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from protocol.primitives import Reader, Writer
from protocol.records import decode_batches
from protocol.schema import Message
from protocol.supported import SUPPORTED

NODE_ID = 0
UNSUPPORTED_VERSION = 35


@dataclass(frozen=True, slots=True)
class WrittenBatch:
    """A batch the peer accepted, with the header fields idempotence is about."""

    partition: int
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    values: tuple[bytes | None, ...]


class ScriptedBroker:
    """`async with ScriptedBroker() as peer:` then point a client at `peer.bootstrap`."""

    def __init__(self, versions: Mapping[int, tuple[int, int]] | None = None) -> None:
        self.versions = dict(SUPPORTED if versions is None else versions)
        self.topics: dict[str, int] = {}
        self.requests: dict[int, list[Message]] = defaultdict(list)
        self.written: dict[tuple[str, int], list[WrittenBatch]] = defaultdict(list)
        self.committed: dict[tuple[str, int], int] = {}
        self._script: dict[int, deque[int]] = defaultdict(deque)
        self._holds: dict[int, int] = {}
        self._arrived = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = -1
        self._pids = itertools.count(1000)
        self._txn_ids: dict[str, tuple[int, int]] = {}
        self._generation = 0
        self._assignment = b""

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> ScriptedBroker:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for w in list(self._writers):  # the client handlers see EOF and end
            w.close()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ scripting
    def add_topic(self, name: str, partitions: int = 1) -> None:
        self.topics[name] = partitions

    def fail(self, request_cls: type[Message], *codes: int) -> None:
        """The next len(codes) requests of this API are answered with these error codes, in order."""
        self._script[request_cls.API_KEY].extend(codes)

    def received(self, request_cls: type[Message]) -> list[Any]:
        return self.requests[request_cls.API_KEY]

    def count(self, request_cls: type[Message]) -> int:
        return len(self.requests[request_cls.API_KEY])

    async def wait_for(self, request_cls: type[Message], n: int, timeout: float = 10.0) -> None:
        """Wait (on the arrival of requests, not on a clock) until `n` requests of the API arrived."""
        async def arrived() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: self.count(request_cls) >= n)

        await asyncio.wait_for(arrived(), timeout)

    def _next_code(self, api_key: int) -> int:
        q = self._script.get(api_key)
        return q.popleft() if q else 0

    # ------------------------------------------------------------------ the wire
    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests are answered concurrently (so `hold` can keep one back while later ones
        arrive) but written in the order they came, as a broker must."""
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        self._writers.add(writer)
        answers: asyncio.Queue[tuple[int, bool, asyncio.Task[bytes]] | None] = asyncio.Queue()
        out = asyncio.get_running_loop().create_task(self._write_answers(answers, writer))
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                r = Reader(await reader.readexactly(size))
                api_key = struct.unpack_from(">h", r.buf, 0)[0]
                req_cls = REQUESTS[api_key]
                h = read_request_header(r, req_cls.FLEXIBLE)
                req = req_cls.read(r, h.api_version)
                code = self._next_code(api_key) if api_key != 18 else 0  # decided in arrival order
                self.requests[api_key].append(req)
                async with self._arrived:
                    self._arrived.notify_all()
                answer = asyncio.get_running_loop().create_task(self._answer(api_key, h.api_version, req, code))
                flexible = response_header_flexible(api_key, req_cls.is_flexible(h.api_version))
                answers.put_nowait((h.correlation_id, flexible, answer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            answers.put_nowait(None)
            await asyncio.gather(out, return_exceptions=True)
            writer.close()
            self._clients.discard(task)
            self._writers.discard(writer)

    async def _write_answers(self, answers: asyncio.Queue[tuple[int, bool, asyncio.Task[bytes]] | None],
                             writer: asyncio.StreamWriter) -> None:
        while (item := await answers.get()) is not None:
            corr, flexible, answer = item
            body = await answer
            w = Writer()
            write_response_header(w, corr, flexible)
            w.raw(body)
            payload = w.getvalue()
            writer.write(struct.pack(">i", len(payload)) + payload)
            await writer.drain()

    def hold(self, request_cls: type[Message], until: int) -> None:
        """Answer no request of this API before `until` of them have arrived: lets a test put
        several requests in flight at once, deterministically."""
        self._holds[request_cls.API_KEY] = until

    async def _answer(self, api_key: int, v: int, req: Any, code: int) -> bytes:
        if api_key == 18:
            lo, hi = self.versions[18]
            keys = [ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in sorted(self.versions.items())]
            if v > hi:  # what a broker does for a newer ApiVersions (KIP-511): a v0 body with its ranges
                return ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=keys).encode(0)
            return ApiVersionsResponse(error_code=0, api_keys=keys).encode(v)
        until = self._holds.get(api_key)
        if until is not None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: len(self.requests[api_key]) >= until)
        handler = getattr(self, f"_api_{api_key}")
        resp: Message = handler(req, v, code)
        if api_key == 1 and not code:
            await asyncio.sleep(min(req.max_wait_ms, 100) / 1000)  # a long poll with nothing new
        return resp.encode(v)

    # ------------------------------------------------------------------ APIs
    def _api_3(self, req: Any, v: int, code: int) -> MetadataResponse:  # Metadata
        names = list(self.topics) if not req.topics else [t.name for t in req.topics]
        topics = []
        for name in names:
            n = self.topics.get(name)
            if n is None:
                topics.append(MetadataResponseTopic(error_code=3, name=name, partitions=[]))
                continue
            topics.append(MetadataResponseTopic(error_code=0, name=name, partitions=[
                MetadataResponsePartition(error_code=0, partition_index=p, leader_id=NODE_ID, leader_epoch=0,
                                          replica_nodes=[NODE_ID], isr_nodes=[NODE_ID]) for p in range(n)]))
        return MetadataResponse(brokers=[MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)],
                                cluster_id="scripted", controller_id=NODE_ID, topics=topics)

    def _api_10(self, req: Any, v: int, code: int) -> FindCoordinatorResponse:  # FindCoordinator
        node, host, port = (-1, "", -1) if code else (NODE_ID, "127.0.0.1", self.port)
        if v >= 4:
            return FindCoordinatorResponse(coordinators=[
                Coordinator(key=k, node_id=node, host=host, port=port, error_code=code) for k in req.coordinator_keys])
        return FindCoordinatorResponse(error_code=code, node_id=node, host=host, port=port)

    def _api_22(self, req: Any, v: int, code: int) -> InitProducerIdResponse:  # InitProducerId
        if code:
            return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
        if req.transactional_id is None:  # as Kafka: an idempotent producer always gets a fresh id
            return InitProducerIdResponse(producer_id=next(self._pids), producer_epoch=0)
        pid, epoch = self._txn_ids.get(req.transactional_id, (next(self._pids), -1))
        self._txn_ids[req.transactional_id] = (pid, epoch + 1)
        return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch + 1)

    def _api_24(self, req: Any, v: int, code: int) -> AddPartitionsToTxnResponse:  # AddPartitionsToTxn
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                for p in t.partitions]) for t in req.v3_and_below_topics])

    def _api_25(self, req: Any, v: int, code: int) -> AddOffsetsToTxnResponse:  # AddOffsetsToTxn
        return AddOffsetsToTxnResponse(error_code=code)

    def _api_28(self, req: Any, v: int, code: int) -> TxnOffsetCommitResponse:  # TxnOffsetCommit
        return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.topics])

    def _api_26(self, req: Any, v: int, code: int) -> EndTxnResponse:  # EndTxn
        if code or v < 5:
            return EndTxnResponse(error_code=code)
        pid, epoch = self._txn_ids[req.transactional_id]  # v5 (KIP-890): every end bumps the epoch
        self._txn_ids[req.transactional_id] = (pid, epoch + 1)
        return EndTxnResponse(producer_id=pid, producer_epoch=epoch + 1)

    def _api_0(self, req: Any, v: int, code: int) -> ProduceResponse:  # Produce
        topics = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                first = -1
                if not code:
                    log = self.written[(t.name, p.index)]
                    first = next_offset = log[-1].base_offset + len(log[-1].values) if log else 0
                    for h, records in decode_batches(bytes(p.records), strict=True):
                        log.append(WrittenBatch(p.index, next_offset, h.producer_id, h.producer_epoch,
                                                h.base_sequence, h.is_transactional, tuple(r.value for r in records)))
                        next_offset += len(records)
                parts.append(PartitionProduceResponse(index=p.index, error_code=code, base_offset=first))
            topics.append(TopicProduceResponse(name=t.name, partition_responses=parts))
        return ProduceResponse(responses=topics)

    def _api_11(self, req: Any, v: int, code: int) -> JoinGroupResponse:  # JoinGroup
        if code:
            return JoinGroupResponse(error_code=code, protocol_name=None, leader="", member_id=req.member_id)
        member = req.member_id or "member-1"
        self._generation += 1
        proto = req.protocols[0]
        return JoinGroupResponse(generation_id=self._generation, protocol_name=proto.name, leader=member,
                                 member_id=member, members=[JoinGroupResponseMember(
                                     member_id=member, group_instance_id=req.group_instance_id,
                                     metadata=proto.metadata)])

    def _api_14(self, req: Any, v: int, code: int) -> SyncGroupResponse:  # SyncGroup
        if code:
            return SyncGroupResponse(error_code=code)
        for a in req.assignments:
            if a.member_id == req.member_id:
                self._assignment = a.assignment
        return SyncGroupResponse(assignment=self._assignment)

    def _api_12(self, req: Any, v: int, code: int) -> HeartbeatResponse:  # Heartbeat
        return HeartbeatResponse(error_code=code)

    def _api_13(self, req: Any, v: int, code: int) -> LeaveGroupResponse:  # LeaveGroup
        return LeaveGroupResponse(error_code=code)

    def _api_8(self, req: Any, v: int, code: int) -> OffsetCommitResponse:  # OffsetCommit
        if not code:
            for t in req.topics:
                for p in t.partitions:
                    self.committed[(t.name, p.partition_index)] = p.committed_offset
        return OffsetCommitResponse(topics=[OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.topics])

    def _api_9(self, req: Any, v: int, code: int) -> OffsetFetchResponse:  # OffsetFetch (v2-7: top-level code)
        topics = [OffsetFetchResponseTopic(name=t.name, partitions=[
            OffsetFetchResponsePartition(partition_index=p, committed_offset=-1 if code else self.committed.get(
                (t.name, p), -1), metadata="", error_code=code if v < 2 else 0)
            for p in t.partition_indexes]) for t in req.topics or []]
        return OffsetFetchResponse(topics=topics, error_code=code)

    def _api_2(self, req: Any, v: int, code: int) -> ListOffsetsResponse:  # ListOffsets
        def offset(topic: str, partition: int, ts: int) -> int:
            log = self.written[(topic, partition)]
            return 0 if ts == -2 or not log else log[-1].base_offset + len(log[-1].values)

        return ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                         offset=offset(t.name, p.partition_index, p.timestamp))
            for p in t.partitions]) for t in req.topics])

    def _api_1(self, req: Any, v: int, code: int) -> FetchResponse:  # Fetch: nothing to return
        return FetchResponse(responses=[FetchableTopicResponse(topic=t.topic, partitions=[
            PartitionData(partition_index=p.partition, error_code=code, high_watermark=p.fetch_offset,
                          last_stable_offset=p.fetch_offset, log_start_offset=0, records=b"")
            for p in t.partitions]) for t in req.topics])
