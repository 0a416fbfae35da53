"""Issue 24, found by the fuzzer: creating a topic of hundreds of partitions opened every new
partition log (directory creation, fsyncs of directories) on the event loop while the metadata
image was applied — 11-14 s of stall under load, the broker fenced. Now a replica's log opens on
its log directory's I/O thread; the partition leads or follows, as the image says *when it is
open*, only then, and answers NOT_LEADER_OR_FOLLOWER meanwhile (Kafka's answer for a replica not
ready yet). A fault hook blocks the opening's file operations, as a busy disk would: the loop
must go on, and later metadata changes for the same partition must win over the stale open."""

from __future__ import annotations

import asyncio
import errno
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.recording_fs import Hold, RecordingFileSystem
from helpers.wait import wait_until_async

from broker.config import BrokerConfig
from broker.metadata.image import MetadataImage
from broker.topics import TopicTable
from protocol.clock import SystemClock
from protocol.errors import ErrorCode
from protocol.messages.metadata_records import (
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from protocol.records import build_batch_from_messages
from storage.config import LogConfig
from storage.log import PartitionLog

ME, OTHER = 1, 2


def _topic(image: MetadataImage, name: str, tid: uuid.UUID, partitions: int, leader: int = ME) -> MetadataImage:
    image = image.apply(image.offset + 1, TopicRecord(name=name, topic_id=tid))
    for i in range(partitions):
        image = image.apply(image.offset + 1, PartitionRecord(partition_id=i, topic_id=tid, replicas=[ME, OTHER],
                                                              isr=[ME, OTHER], leader=leader, leader_epoch=0,
                                                              partition_epoch=0))
    return image


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[TopicTable, Hold, RecordingFileSystem]]:
    """A table whose file system blocks, once armed, the data directory's fsync (a new
    partition's directory made durable in its parent) until released."""
    hold = Hold("fsync_dir", "data", wait_s=3.0)
    fs = RecordingFileSystem(fault=hold)
    table = TopicTable(BrokerConfig(node_id=ME, data_dir=str(tmp_path / "data")), SystemClock(), fs=fs)
    table.load()
    hold.armed, hold.threads = True, {}  # what start-up did on this thread aside
    yield table, hold, fs
    hold.release.set()
    table.close()


async def test_new_partitions_open_on_the_io_thread_and_answer_not_leader_until_open(
        held: tuple[TopicTable, Hold, RecordingFileSystem]) -> None:
    table, hold, _ = held
    table.apply_image(_topic(MetadataImage(), "t", uuid.uuid4(), 20))  # returns while the disk is held
    await wait_until_async(hold.entered.is_set, message="the first open to reach the held fsync")
    assert threading.get_ident() not in hold.ran_on("fsync_dir", "data")  # not on the loop
    for i in range(20):
        assert table.partition("t", i) is None
        assert table.missing("t", i) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # retriable: not ready yet
    hold.release.set()
    await table.settled()
    for i in range(20):
        part = table.partition("t", i)
        assert part is not None and part.is_leader and part.leader_epoch == 0
    assert threading.get_ident() not in hold.ran_on("fsync_dir", "data")


async def test_a_leader_change_while_the_log_opens_is_what_the_partition_takes_up(
        held: tuple[TopicTable, Hold, RecordingFileSystem]) -> None:
    table, hold, _ = held
    tid = uuid.uuid4()
    image = _topic(MetadataImage(), "t", tid, 1, leader=OTHER)
    table.apply_image(image)
    await wait_until_async(hold.entered.is_set, message="the open to reach the held fsync")
    image = image.apply(image.offset + 1, PartitionChangeRecord(partition_id=0, topic_id=tid, leader=ME))
    table.apply_image(image)
    assert table.partition("t", 0) is None
    hold.release.set()
    await table.settled()
    part = table.partition("t", 0)
    assert part is not None and part.is_leader and part.leader_epoch == image.topics["t"].partitions[0].leader_epoch


async def test_a_topic_deleted_while_its_logs_open_leaves_no_log_and_no_directory(
        held: tuple[TopicTable, Hold, RecordingFileSystem], tmp_path: Path) -> None:
    table, hold, _ = held
    tid = uuid.uuid4()
    image = _topic(MetadataImage(), "t", tid, 3)
    table.apply_image(image)
    await wait_until_async(hold.entered.is_set, message="the open to reach the held fsync")
    table.apply_image(image.apply(image.offset + 1, RemoveTopicRecord(topic_id=tid)))
    hold.release.set()
    await table.settled()
    assert table.get("t") is None and table.partition("t", 0) is None
    assert not [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")]
    assert table.log_dirs.locate(("t", 0)) is None


async def test_a_topic_deleted_and_created_again_while_the_first_opens_gets_its_log_after_the_removal(
        held: tuple[TopicTable, Hold, RecordingFileSystem], tmp_path: Path) -> None:
    table, hold, fs = held
    first, second = uuid.uuid4(), uuid.uuid4()
    image = _topic(MetadataImage(), "t", first, 1)
    table.apply_image(image)
    await wait_until_async(hold.entered.is_set, message="the open to reach the held fsync")
    image = image.apply(image.offset + 1, RemoveTopicRecord(topic_id=first))
    table.apply_image(image)
    table.apply_image(_topic(image, "t", second, 1))
    hold.release.set()
    await table.settled()
    topic = table.get("t")
    part = table.partition("t", 0)
    assert topic is not None and topic.topic_id == second
    assert part is not None and part.is_leader and not part.closed
    directory = tmp_path / "data" / "t-0"
    assert directory.is_dir() and part.directory == directory  # the removal ran before, not after
    ops = [op for op, p in fs.calls if p == directory and op in ("mkdir", "rename")]
    assert ops == ["mkdir", "rename", "mkdir"]  # retired (then removed) between the two opens


async def test_an_existing_log_is_loaded_off_the_loop(tmp_path: Path) -> None:
    """A replica whose log is on disk already (a broker following a reassignment back, or the
    metadata replayed at start) is recovered on the I/O thread too: reading its segments can be long."""
    data = tmp_path / "data"
    plog = PartitionLog.open(data / "t-0", LogConfig())
    for i in range(5):
        plog.append(build_batch_from_messages([(None, b"%d" % i, [], None)]), leader_epoch=0)
    plog.close()
    hold = Hold("listdir", "t-0", wait_s=3.0)
    table = TopicTable(BrokerConfig(node_id=ME, data_dir=str(data)), SystemClock(), fs=RecordingFileSystem(fault=hold))
    table.load()
    hold.armed, hold.threads = True, {}
    try:
        table.apply_image(_topic(MetadataImage(), "t", uuid.uuid4(), 1))
        await wait_until_async(hold.entered.is_set, message="the load to reach the held listing")
        assert table.partition("t", 0) is None
        hold.release.set()
        await table.settled()
        part = table.partition("t", 0)
        assert part is not None and part.log_end_offset == 5
        assert threading.get_ident() not in hold.ran_on("listdir", "t-0")
    finally:
        hold.release.set()
        table.close()


async def test_a_broker_stopping_while_logs_open_closes_the_one_open_and_opens_no_other(
        held: tuple[TopicTable, Hold, RecordingFileSystem], tmp_path: Path) -> None:
    table, hold, _ = held
    table.apply_image(_topic(MetadataImage(), "t", uuid.uuid4(), 5))
    await wait_until_async(hold.entered.is_set, message="the first open to reach the held fsync")
    opens = list(table._opens)
    closing = asyncio.ensure_future(asyncio.to_thread(table.close))  # waits for the open under way
    await wait_until_async(lambda: table._closing, message="close() to begin")
    hold.release.set()
    await asyncio.wait_for(closing, 10)
    opened = [op.part for op in opens if op.part is not None]
    assert len(opened) == 1 and opened[0].closed  # closed, not left open
    assert sorted(p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")) == ["t-0"]


async def test_a_log_directory_failing_under_an_open_takes_only_that_replica_offline(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"

    def eio(op: str, path: Path) -> None:
        if op == "mkdir" and path == a / "t-0":
            raise OSError(errno.EIO, "Input/output error", str(path))

    table = TopicTable(BrokerConfig(node_id=ME, log_dirs=f"{a},{b}"), SystemClock(), fs=RecordingFileSystem(fault=eio))
    table.load()
    try:
        table.apply_image(_topic(MetadataImage(), "t", uuid.uuid4(), 1))
        await table.settled()
        assert table.partition("t", 0) is None
        assert table.missing("t", 0) == ErrorCode.KAFKA_STORAGE_ERROR
        assert [d.online for d in table.log_dirs.dirs] == [False, True]
    finally:
        table.close()


class _Controller:
    """The active controller as the table sees it (TopicWriter): commits a creation as an image."""

    def __init__(self, table: TopicTable) -> None:
        self.table, self.image = table, MetadataImage()

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: object,
                           assignments: object) -> None:
        self.image = _topic(self.image, name, uuid.uuid4(), partitions)
        self.table.apply_image(self.image)


async def test_a_topic_deleted_while_its_creation_waits_for_its_logs_answers_without_an_error(
        held: tuple[TopicTable, Hold, RecordingFileSystem]) -> None:
    """Found by the fuzzer (`Metadata: KeyError`, auto-creation racing a DeleteTopics): the
    creation, committed, gave its logs time to open, and looked the topic up after that wait."""
    table, hold, _ = held
    controller = _Controller(table)
    table.writer = controller  # type: ignore[assignment]
    creating = asyncio.ensure_future(table.create("t", 2, 1))
    await wait_until_async(hold.entered.is_set, message="the creation's logs to be opening")
    tid = table.image.topics["t"].topic_id
    table.apply_image(table.image.apply(table.image.offset + 1, RemoveTopicRecord(topic_id=tid)))
    hold.release.set()
    topic = await asyncio.wait_for(creating, 10)
    assert topic.name == "t" and topic.topic_id == tid and table.get("t") is None


async def _held_removal(tmp_path: Path) -> tuple[TopicTable, Hold, MetadataImage, uuid.UUID]:
    """A table holding topic t (3 partitions, records in partition 0) whose file system blocks,
    once armed, the removal of a partition directory."""
    hold = Hold("remove_tree", "t-", wait_s=3.0)
    table = TopicTable(BrokerConfig(node_id=ME, data_dir=str(tmp_path / "data")), SystemClock(),
                       fs=RecordingFileSystem(fault=hold))
    table.load()
    tid = uuid.uuid4()
    image = _topic(MetadataImage(), "t", tid, 3)
    table.apply_image(image)
    await table.settled()
    part = table.partition("t", 0)
    assert part is not None
    part._log.append(build_batch_from_messages([(None, b"old", [], None)]), leader_epoch=0)
    hold.armed, hold.threads = True, {}
    return table, hold, image, tid


async def test_a_deleted_topics_logs_are_removed_on_the_io_thread_and_leave_the_table_at_once(tmp_path: Path) -> None:
    """Deleting a topic of 514 partitions closed (flushed, snapshotted, checkpointed) and removed
    every log on the event loop: 5.2 s here. A log going away is closed without writing (its
    files go) and its directory removed on the log directory's I/O thread."""
    table, hold, image, tid = await _held_removal(tmp_path)
    try:
        old = table.partition("t", 0)
        table.apply_image(image.apply(image.offset + 1, RemoveTopicRecord(topic_id=tid)))
        await wait_until_async(hold.entered.is_set, message="the removal to reach the held remove_tree")
        assert old is not None and old.closed
        assert table.partition("t", 0) is None and table.missing("t", 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        hold.release.set()
        await table.settled()
        assert not [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")]
        assert threading.get_ident() not in hold.ran_on("remove_tree", "t-")
    finally:
        hold.release.set()
        table.close()


async def test_a_topic_created_again_while_the_old_logs_are_removed_opens_empty_logs_after(tmp_path: Path) -> None:
    table, hold, image, tid = await _held_removal(tmp_path)
    try:
        image = image.apply(image.offset + 1, RemoveTopicRecord(topic_id=tid))
        table.apply_image(image)
        table.apply_image(_topic(image, "t", uuid.uuid4(), 3))
        await wait_until_async(hold.entered.is_set, message="the removal to reach the held remove_tree")
        assert table.partition("t", 0) is None  # not opened over the old log's directory
        hold.release.set()
        await table.settled()
        part = table.partition("t", 0)
        assert part is not None and part.log_end_offset == 0 and part.is_leader
        assert sorted(p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")) == ["t-0", "t-1", "t-2"]
    finally:
        hold.release.set()
        table.close()


async def test_coordinator_partitions_led_here_and_still_opening_answer_load_in_progress(
        held: tuple[TopicTable, Hold, RecordingFileSystem]) -> None:
    """FindCoordinator names a broker as soon as its metadata makes it the leader of the
    coordinator's partition; while that log still opens (held here), the transaction and group
    coordinators answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry, not NOT_COORDINATOR
    (a fresh-clone run: librdkafka's synchronous commit failed on it right after the offsets topic
    was created)."""
    from types import SimpleNamespace
    from typing import Any

    from broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
    from broker.metrics import BrokerMetrics
    from broker.txn.coordinator import TOPIC, TransactionCoordinator

    table, hold, _ = held
    cfg = BrokerConfig(node_id=ME, data_dir="unused", transaction_state_num_partitions=1,
                       offsets_topic_num_partitions=1)
    ids: Any = SimpleNamespace(allocate=lambda: 0)
    txn = TransactionCoordinator(cfg, table, ids, BrokerMetrics(), SystemClock(), lambda n: None)
    groups = GroupCoordinator(cfg, table, SystemClock())
    image = _topic(_topic(MetadataImage(), TOPIC, uuid.uuid4(), 1), OFFSETS_TOPIC, uuid.uuid4(), 1)
    table.apply_image(image)
    await wait_until_async(hold.entered.is_set, message="the first open to reach the held fsync")
    assert txn.not_served("any-id") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert groups.sm.coordinator_error("any-group") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    hold.release.set()
    await table.settled()
