"""AllocateProducerIds (67) on the controller listener of a one-voter broker: the request's broker
epoch must be the broker's current registration's, or the answer is STALE_BROKER_EPOCH with no
block — as Kafka's controller checks it (a request from a process that has since been replaced
gets nothing)."""

from __future__ import annotations

from pathlib import Path

from broker.config import BrokerConfig
from broker.server import BrokerServer
from broker.wire import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse


async def test_a_stale_broker_epoch_gets_no_block(tmp_path: Path) -> None:
    server = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                       controller_listen="127.0.0.1:0", data_dir=str(tmp_path)))
    await server.start()
    conn = await BrokerConnection.connect(*server.controller_endpoint, client_id="test")
    try:
        node = server.cfg.node_id
        epoch = server.controller.image.broker(node).epoch  # type: ignore[union-attr]
        before = server.controller.image.next_producer_id
        for stale in (epoch - 1, epoch + 1, -1):
            resp = await conn.request(AllocateProducerIdsRequest(broker_id=node, broker_epoch=stale))
            assert isinstance(resp, AllocateProducerIdsResponse)
            assert (resp.error_code, resp.producer_id_start) == (ErrorCode.STALE_BROKER_EPOCH, -1), stale
        resp = await conn.request(AllocateProducerIdsRequest(broker_id=node + 1, broker_epoch=epoch))  # unknown
        assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert server.controller.image.next_producer_id == before  # nothing granted
        resp = await conn.request(AllocateProducerIdsRequest(broker_id=node, broker_epoch=epoch))
        assert resp.error_code == 0 and resp.producer_id_start >= before
    finally:
        conn.close()
        await server.stop()
