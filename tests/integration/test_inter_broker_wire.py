"""The broker's outgoing connections (broker/wire.py) against a real broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.broker import BrokerProcess

from broker.wire import BrokerConnection, Channel


async def test_concurrent_callers_share_one_connect(broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two connections to one peer for one purpose would let its requests overtake each other."""
    host, port = broker.inter_broker_bootstrap.split(":")
    connects: list[tuple[str, int]] = []
    real = BrokerConnection.connect.__func__  # type: ignore[attr-defined]

    async def counted(cls: type[BrokerConnection], h: str, p: int, **kw: Any) -> BrokerConnection:
        connects.append((h, p))
        return await real(cls, h, p, **kw)

    monkeypatch.setattr(BrokerConnection, "connect", classmethod(counted))
    channel = Channel(lambda node: (host, int(port)), "test")
    try:
        conns = await asyncio.gather(*(channel.connection(7) for _ in range(5)))
        assert len({id(c) for c in conns}) == 1
        assert connects == [(host, int(port))]
        conns[0].close()
        again = await channel.connection(7)  # a closed connection is replaced
        assert again is not conns[0] and not again.closed and len(connects) == 2
    finally:
        channel.close()
