"""AlterPartition (56) on the controller listener of a one-voter broker, each version: the
controller's checks come back in Kafka's terms and a good change is committed (partition epoch
bumped, leader epoch kept) and answered with the committed state."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.server import BrokerServer
from broker.wire import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
    PartitionData,
    TopicData,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_alter_partition_checks_and_commits(tmp_path: Path, version: int) -> None:
    server = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                       controller_listen="127.0.0.1:0", data_dir=str(tmp_path)))
    await server.start()
    conn = await BrokerConnection.connect(*server.controller_endpoint, client_id="test")
    try:
        topic = await server.topics.create("t", 1)
        node = server.cfg.node_id
        epoch = server.controller.image.broker(node).epoch  # type: ignore[union-attr]

        async def alter(broker_epoch: int, leader_epoch: int, partition_epoch: int,
                        topic_id: uuid.UUID = topic.topic_id) -> tuple[int, int, list[int]]:
            part = PartitionData(partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                                 new_isr=[node], new_isr_with_epochs=[BrokerState(broker_id=node, broker_epoch=epoch)])
            resp = await conn.request(AlterPartitionRequest(broker_id=node, broker_epoch=broker_epoch, topics=[
                TopicData(topic_name="t", topic_id=topic_id, partitions=[part])]), version=version)
            assert isinstance(resp, AlterPartitionResponse) and resp.error_code == 0
            p = resp.topics[0].partitions[0]
            return p.error_code, p.partition_epoch, p.isr

        assert (await alter(epoch + 5, 0, 0))[0] == ErrorCode.STALE_BROKER_EPOCH
        assert (await alter(epoch, 3, 0))[0] == ErrorCode.FENCED_LEADER_EPOCH
        assert (await alter(epoch, 0, 9))[0] == ErrorCode.INVALID_UPDATE_VERSION
        if version >= 2:
            assert (await alter(epoch, 0, 0, uuid.uuid4()))[0] == ErrorCode.UNKNOWN_TOPIC_ID
        assert await alter(epoch, 0, 0) == (0, 1, [node])
        info = server.topics.image.topics["t"].partitions[0]
        assert (info.partition_epoch, info.leader_epoch) == (1, 0)
        assert topic.partitions[0].assignment.partition_epoch == 1  # type: ignore[union-attr]
    finally:
        conn.close()
        await server.stop()
