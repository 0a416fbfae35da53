"""One in-process broker that is its own controller, and a connection to its controller listener:
what a test of a controller request (AlterPartition, ...) sends on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from broker.config import BrokerConfig
from broker.server import BrokerServer
from broker.wire import BrokerConnection


@asynccontextmanager
async def controller_link(data_dir: Path) -> AsyncIterator[tuple[BrokerServer, BrokerConnection]]:
    server = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                       controller_listen="127.0.0.1:0", data_dir=str(data_dir)))
    await server.start()
    try:
        conn = await BrokerConnection.connect(*server.controller_endpoint, client_id="test")
        try:
            yield server, conn
        finally:
            conn.close()
    finally:
        await server.stop()
