"""AlterReplicaLogDirs' answers (TopicTable.alter_log_dir), on a topic table following a metadata
image built by hand: Kafka's error per case, a directory remembered for a replica not here yet,
and a move redirected or called off."""

from __future__ import annotations

import uuid
from pathlib import Path

from helpers.wait import wait_until_async

from broker.config import BrokerConfig
from broker.log_dirs import FUTURE_MARKER
from broker.metadata.image import MetadataImage
from broker.topics import TopicTable
from protocol.clock import SystemClock
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import PartitionChangeRecord, PartitionRecord, TopicRecord
from protocol.records import build_batch_from_messages


async def test_answers_a_preference_for_a_replica_to_come_and_a_move_redirected_or_called_off(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    table = TopicTable(BrokerConfig(node_id=1, log_dirs=f"{a},{b},{c}"), SystemClock())
    table.load()
    tid = uuid.uuid4()
    image = MetadataImage().apply(1, TopicRecord(name="t", topic_id=tid))
    image = image.apply(2, PartitionRecord(partition_id=0, topic_id=tid, replicas=[2], isr=[2], leader=2,
                                           leader_epoch=0, partition_epoch=0))
    table.apply_image(image)
    try:
        assert table.alter_log_dir("t", 0, str(tmp_path / "elsewhere")) == ErrorCode.LOG_DIR_NOT_FOUND
        assert table.alter_log_dir("nope", 0, str(c)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # on broker 2 only: remembered, and the replica is created there when it comes here
        assert table.alter_log_dir("t", 0, str(c)) == ErrorCode.REPLICA_NOT_AVAILABLE
        image = image.apply(3, PartitionChangeRecord(partition_id=0, topic_id=tid, replicas=[2, 1]))
        table.apply_image(image)
        await table.settled()  # the replica's log opens on its directory's I/O thread
        part = table.partition("t", 0)
        assert part is not None and part.directory.parent == c  # not a, the least loaded
        for i in range(50):  # a follower here: written straight into its log
            part._log.append(build_batch_from_messages([(None, b"%d" % i * 100, [], None)]), leader_epoch=0)
        assert table.alter_log_dir("t", 0, str(c)) == ErrorCode.NONE and not table.moves  # already there

        # a move to a, redirected to b before it ends: the copy in a goes, the replica ends in b
        assert table.alter_log_dir("t", 0, str(a)) == ErrorCode.NONE
        first = table.moves[("t", 0)]
        assert table.alter_log_dir("t", 0, str(b)) == ErrorCode.NONE
        assert table.moves[("t", 0)] is not first
        await wait_until_async(lambda: not table.moves and part.directory.parent == b, 10,
                               message="the replica in b")
        await wait_until_async(lambda: not (a / "t-0").exists() and not (c / "t-0").exists(), 10,
                               message="nothing left in a and c")
        # a move called off by asking for the directory the replica is in: it stays, the copy goes
        assert table.alter_log_dir("t", 0, str(c)) == ErrorCode.NONE
        assert table.alter_log_dir("t", 0, str(b)) == ErrorCode.NONE
        await wait_until_async(lambda: not table.moves and not (c / "t-0" / FUTURE_MARKER).exists(), 10,
                               message="the move called off")
        assert part.directory.parent == b and not (c / "t-0").exists()
        assert part.log_end_offset == 50
    finally:
        table.close()


async def test_a_move_waits_for_the_brokers_move_throttle(tmp_path: Path) -> None:
    """replica_alter_log_dirs_io_max_bytes_per_second reaches the moves: about 6 KB copied at
    4000 B/s waits for the quota (the bound itself: tests/unit/test_replica_move.py)."""
    a, b = tmp_path / "a", tmp_path / "b"
    table = TopicTable(BrokerConfig(node_id=1, log_dirs=f"{a},{b}", replica_alter_log_dirs_io_max_bytes_per_second=4000),
                       SystemClock())
    table.load()
    tid = uuid.uuid4()
    image = MetadataImage().apply(1, TopicRecord(name="t", topic_id=tid))
    image = image.apply(2, PartitionRecord(partition_id=0, topic_id=tid, replicas=[2, 1], isr=[2], leader=2,
                                           leader_epoch=0, partition_epoch=0))
    table.apply_image(image)
    await table.settled()
    try:
        part = table.partition("t", 0)
        assert part is not None and part.directory.parent == a and table.move_throttle is not None
        for i in range(30):
            part._log.append(build_batch_from_messages([(None, b"%03d" % i * 60, [], None)]), leader_epoch=0)
        assert table.alter_log_dir("t", 0, str(b)) == ErrorCode.NONE
        await wait_until_async(lambda: not table.moves and part.directory.parent == b, 15,
                               message="the replica in b")
        assert table.move_throttle.waited_s > 0.5
        assert part.log_end_offset == 30
    finally:
        table.close()
