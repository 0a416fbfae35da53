"""A bare Kafka connection for tests that need to send exact bytes: frames out, frames in."""

from __future__ import annotations

import socket
import struct

from protocol.headers import RequestHeader, read_response_header, write_request_header
from protocol.messages.registry import RESPONSES
from protocol.primitives import Reader, Writer
from protocol.schema import Message


class Raw:
    """A bare Kafka connection: frames out, frames in, nothing clever."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, body: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def recv_frame(self) -> bytes | None:
        """The next frame, or None if the broker closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        return self._recv_exact(struct.unpack(">i", head)[0])

    def _recv_exact(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def _frame(self, req: Message, version: int) -> bytes:
        self.corr += 1
        w = Writer()
        write_request_header(
            w, RequestHeader(req.API_KEY, version, self.corr, "raw-test"), req.is_flexible(version)
        )
        req.write(w, version)
        body = w.getvalue()
        return struct.pack(">i", len(body)) + body

    def send(self, req: Message, version: int) -> int:
        """Send without waiting; returns the correlation id."""
        self.sock.sendall(self._frame(req, version))
        return self.corr

    def send_pipelined(self, reqs: list[tuple[Message, int]]) -> None:
        """Several requests in one write, so the broker reads them together (pipelining)."""
        self.sock.sendall(b"".join(self._frame(req, version) for req, version in reqs))

    def receive(self, req_cls: type[Message], version: int) -> tuple[int, Message]:
        """Read one response; returns (correlation id, body)."""
        frame = self.recv_frame()
        assert frame is not None, "broker closed the connection"
        r = Reader(frame)
        corr = read_response_header(r, req_cls.is_flexible(version) and req_cls.API_KEY != 18)
        return corr, RESPONSES[req_cls.API_KEY].read(r, version)

    def request(self, req: Message, version: int, *, expect_reply: bool = True) -> Message | None:
        self.corr += 1
        w = Writer()
        write_request_header(
            w, RequestHeader(req.API_KEY, version, self.corr, "raw-test"), req.is_flexible(version)
        )
        req.write(w, version)
        self.send_frame(w.getvalue())
        if not expect_reply:
            return None
        frame = self.recv_frame()
        assert frame is not None, "broker closed the connection"
        r = Reader(frame)
        flexible = req.is_flexible(version) and req.API_KEY != 18
        assert read_response_header(r, flexible) == self.corr
        return RESPONSES[req.API_KEY].read(r, version)


def producer_ids(port: int, n: int) -> list[int]:
    """`n` producer ids from InitProducerId (no transactional id) on one connection, retrying the
    retriable COORDINATOR_LOAD_IN_PROGRESS a broker answers while its next id block is on its way."""
    from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse  # noqa: PLC0415

    raw = Raw(port)
    out: list[int] = []
    try:
        while len(out) < n:
            resp = raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
            assert isinstance(resp, InitProducerIdResponse)
            if resp.error_code == 0:
                out.append(resp.producer_id)
            else:
                assert resp.error_code == 14, resp
    finally:
        raw.close()
    return out


def produce_values(conn: Raw, topic: str, values: list[bytes], partition: int = 0) -> None:
    """One acks=all ProduceRequest (v9) of `values` in one batch; asserts it was written."""
    from protocol.messages.produce import (  # noqa: PLC0415
        PartitionProduceData,
        ProduceRequest,
        ProduceResponse,
        TopicProduceData,
    )
    from protocol.records import build_batch_from_messages  # noqa: PLC0415

    batch = build_batch_from_messages([(None, v, [], None) for v in values])
    resp = conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])]), 9)
    assert isinstance(resp, ProduceResponse) and resp.responses[0].partition_responses[0].error_code == 0, resp
