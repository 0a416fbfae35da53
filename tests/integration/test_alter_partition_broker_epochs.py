"""KIP-903 on the controller listener of a one-voter broker: AlterPartition v3 names each ISR
member with its broker epoch (NewIsrWithEpochs), and a member whose epoch is not its current
registration's is INELIGIBLE_REPLICA — a delayed request adding a replica that has since crashed
and registered again (its log possibly torn) must not put it in the ISR. Epoch -1 skips the
check, as in Kafka."""

from __future__ import annotations

from pathlib import Path

from helpers.controller_link import controller_link

from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
    PartitionData,
    TopicData,
)


async def test_an_isr_member_of_another_broker_epoch_is_ineligible(tmp_path: Path) -> None:
    async with controller_link(tmp_path) as (server, conn):
        topic = await server.topics.create("t", 1)
        node = server.cfg.node_id
        epoch = server.controller.image.broker(node).epoch  # type: ignore[union-attr]

        async def alter(member_epoch: int, partition_epoch: int) -> int:
            part = PartitionData(partition_index=0, leader_epoch=0, partition_epoch=partition_epoch, new_isr=[node],
                                 new_isr_with_epochs=[BrokerState(broker_id=node, broker_epoch=member_epoch)])
            resp = await conn.request(AlterPartitionRequest(broker_id=node, broker_epoch=epoch, topics=[
                TopicData(topic_name="t", topic_id=topic.topic_id, partitions=[part])]), version=3)
            assert isinstance(resp, AlterPartitionResponse) and resp.error_code == 0
            return resp.topics[0].partitions[0].error_code

        assert await alter(epoch - 1, 0) == ErrorCode.INELIGIBLE_REPLICA  # an earlier registration's
        assert await alter(epoch + 1, 0) == ErrorCode.INELIGIBLE_REPLICA
        assert server.topics.image.topics["t"].partitions[0].partition_epoch == 0  # nothing committed
        assert await alter(epoch, 0) == ErrorCode.NONE
        assert await alter(-1, 1) == ErrorCode.NONE  # -1: not checked
