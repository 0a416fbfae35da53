"""Issue 25: the connection layer serves a listener's API table — a handler per API key, the
version ranges, and which APIs run in request order — given a context and a connection registry,
not the broker. Whether an API's requests are ordered is its module's declaration, not a list
kept beside the network code."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import sys
from typing import Any

import pytest
from helpers.wait import wait_until_async

import broker.apis
import broker.server
from broker.apis import CLIENT_APIS, CONTROLLER_APIS, ApiTable
from broker.connection import Connection, ConnectionRegistry
from broker.metrics import BrokerMetrics
from protocol.framing import encode_request
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

TXN_APIS = {22, 24, 25, 26, 28}  # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit


def test_every_api_module_declares_whether_its_requests_are_ordered() -> None:
    names = [m.name for m in pkgutil.iter_modules(broker.apis.__path__)]
    undeclared = [n for n in names
                  if not isinstance(getattr(importlib.import_module(f"broker.apis.{n}"), "ORDERED", None), bool)]
    assert undeclared == []


def test_each_listener_orders_what_its_modules_declare() -> None:
    for table in (CLIENT_APIS, CONTROLLER_APIS):
        declared = {k for k, h in table.handlers.items() if sys.modules[h.__module__].ORDERED}  # type: ignore[attr-defined]
        assert table.ordered == declared
    assert CLIENT_APIS.ordered == TXN_APIS and not CONTROLLER_APIS.ordered
    assert not hasattr(broker.server, "ORDERED_APIS")


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        self.written.append(bytes(data))

    def close(self) -> None:
        pass


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_connection_runs_in_order_what_its_table_orders(ordered: bool) -> None:
    """Two pipelined requests whose handler yields before answering: the second starts before the
    first ends unless the table orders that API; the answers go out in request order either way."""
    events: list[tuple[str, int]] = []

    async def handle(ctx: Any, client: Any, header: Any, req: Any) -> ApiVersionsResponse:
        events.append(("start", header.correlation_id))
        for _ in range(5):
            await asyncio.sleep(0)  # a turn of the loop: an unordered request behind this one starts now
        events.append(("end", header.correlation_id))
        return ApiVersionsResponse(error_code=0, api_keys=[])

    table = ApiTable({18: handle}, {18: (0, 3)}, frozenset({18}) if ordered else frozenset())
    closed: list[int] = []
    registry = ConnectionRegistry(BrokerMetrics(), 1 << 20, 100, closed.append)
    conn = Connection(object(), table, registry, ("127.0.0.1", 9092))
    transport = _Transport()
    conn.connection_made(transport)
    assert list(registry) == [conn]
    conn.data_received(b"".join(encode_request(ApiVersionsRequest(), 0, n, "t") for n in (1, 2)))
    await wait_until_async(lambda: len(transport.written) == 2, message="both answers")
    expected = [("start", 1), ("end", 1), ("start", 2), ("end", 2)] if ordered else \
        [("start", 1), ("start", 2), ("end", 1), ("end", 2)]
    assert events == expected
    assert [int.from_bytes(f[4:8], "big") for f in transport.written] == [1, 2]
    conn.connection_lost(None)
    assert list(registry) == [] and closed == [conn.info.conn_id]  # its fetch sessions go with it
