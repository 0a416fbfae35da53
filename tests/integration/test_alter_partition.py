"""AlterPartition (56) on the controller listener of a one-voter broker, each version: the
controller's checks come back in Kafka's terms and a good change is committed (partition epoch
bumped, leader epoch kept) and answered with the committed state."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from helpers.controller_link import controller_link

from broker.config import BrokerConfig
from broker.server import BrokerServer
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
    async with controller_link(tmp_path) as (server, conn):
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


async def test_one_request_of_many_partitions_is_one_decision(tmp_path: Path) -> None:
    """An AlterPartition naming many partitions is decided at once and committed as one metadata
    entry, as Kafka's controller writes it. Decided and committed one partition after another,
    a leader's 50 ISR changes queued for a minute ahead of an unclean election when a loaded
    machine made each commit take 1.2 s (a fresh-clone run, docs/testing.md)."""
    async with controller_link(tmp_path) as (server, conn):
        topic = await server.topics.create("many", 20)
        node = server.cfg.node_id
        epoch = server.controller.image.broker(node).epoch  # type: ignore[union-attr]
        before = server.controller.image.offset
        parts = [PartitionData(partition_index=i, leader_epoch=0, partition_epoch=0, new_isr=[node],
                               new_isr_with_epochs=[BrokerState(broker_id=node, broker_epoch=epoch)])
                 for i in range(20)]
        resp = await conn.request(AlterPartitionRequest(broker_id=node, broker_epoch=epoch, topics=[
            TopicData(topic_name="many", topic_id=topic.topic_id, partitions=parts)]), version=3)
        assert isinstance(resp, AlterPartitionResponse) and resp.error_code == 0
        assert [(p.partition_index, p.error_code, p.partition_epoch) for p in resp.topics[0].partitions] == \
            [(i, 0, 1) for i in range(20)]
        assert server.controller.image.offset == before + 1, "one metadata entry for the whole request"


async def test_a_leaders_isr_changes_asked_at_once_go_in_one_request(tmp_path: Path) -> None:
    """The leader's side: ISR changes asked for together (every partition it leads losing a
    follower at the same check) leave in one AlterPartition -- one decision, one metadata entry --
    and each caller gets its own partition's committed state."""
    import asyncio

    from broker.partition.replica_state import IsrChange

    server = BrokerServer(BrokerConfig(listen="127.0.0.1:0", inter_broker_listen="127.0.0.1:0",
                                       controller_listen="127.0.0.1:0", data_dir=str(tmp_path)))
    await server.start()
    try:
        topic = await server.topics.create("batched", 12)
        node = server.cfg.node_id
        before = server.controller.image.offset
        answers = await asyncio.gather(*(
            server.controller_client.alter_partition(p, IsrChange(0, 0, frozenset({node})), server.lifecycle.epoch)
            for p in topic.partitions))
        assert [(code, a.partition_epoch if a else None) for code, a in answers] == [(ErrorCode.NONE, 1)] * 12
        assert server.controller.image.offset == before + 1, "one request, one metadata entry"
    finally:
        await server.stop()
