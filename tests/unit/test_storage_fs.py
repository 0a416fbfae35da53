"""storage/fs.py: what a FileSystem must do (the real one and the simulated one of issue 26,
tests/helpers/dst/disk.py, pass the same tests), and that a FileSystem handed to a PartitionLog, a QuorumStore or a
broker is the one every file operation goes through."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.dst.disk import SimFileSystem
from helpers.recording_fs import RecordingFileSystem

from broker.config import BrokerConfig
from broker.metadata.image import MetadataImage
from broker.quorum.messages import Entry
from broker.quorum.node import Ready
from broker.quorum.store import QuorumStore
from broker.server import BrokerServer
from broker.topics import TopicTable
from protocol.clock import ManualClock, SystemClock
from protocol.messages.metadata_records import PartitionRecord, TopicRecord
from protocol.records import build_batch_from_messages
from storage import LogConfig, PartitionLog, cleaner
from storage.fs import FileSystem, OsFileSystem
from storage.segment import segment_name

IMPLEMENTATIONS: list[Callable[[], FileSystem]] = [OsFileSystem, SimFileSystem]


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda c: c.__name__)
def fs(request: pytest.FixtureRequest, tmp_path: Path) -> FileSystem:
    made: FileSystem = request.param()
    if isinstance(made, SimFileSystem):
        made.mkdir(tmp_path)  # the same paths, on the simulated disk
    return made


# ---- the contract ----------------------------------------------------------------------------------
def test_positional_writes_and_reads(fs: FileSystem, tmp_path: Path) -> None:
    f = fs.open(tmp_path / "a", create=True)
    f.pwrite(b"hello", 0)
    f.pwrite(bytearray(b"world"), 5)
    assert f.pwritev([b"--", memoryview(b"xyz")[1:]], 10) == 4
    assert f.size() == 14
    assert f.pread(5, 5) == b"world"
    assert f.pread(100, 10) == b"--yz"  # short only at the end
    assert f.pread(10, 14) == b""
    f.pwrite(b"W", 5)  # overwrite in place
    assert f.pread(14, 0) == b"helloWorld--yz"
    f.sync()
    f.datasync()
    f.close()
    f.close()  # again: nothing (a double close must not close a reused descriptor)
    assert fs.read(tmp_path / "a") == b"helloWorld--yz"
    assert fs.stat(tmp_path / "a").size == 14


def test_truncate_shrinks_and_extends_with_zeros(fs: FileSystem, tmp_path: Path) -> None:
    f = fs.open(tmp_path / "a", create=True)
    f.pwrite(b"0123456789", 0)
    f.truncate(4)
    assert (f.size(), f.pread(10, 0)) == (4, b"0123")
    f.truncate(6)
    assert f.pread(10, 0) == b"0123\0\0"
    f.close()


def test_open_modes(fs: FileSystem, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        fs.read(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        fs.stat(tmp_path / "missing")
    f = fs.open(tmp_path / "a", create=True)
    f.pwrite(b"abc", 0)
    f.close()
    again = fs.open(tmp_path / "a", create=True)  # create keeps what is there
    assert again.pread(3, 0) == b"abc"
    again.close()
    emptied = fs.open(tmp_path / "a", create=True, truncate=True)
    assert emptied.size() == 0
    emptied.pwrite(b"xy", 0)
    emptied.close()
    ro = fs.open(tmp_path / "a", read_only=True)
    assert ro.pread(2, 0) == b"xy"
    with pytest.raises(OSError):
        ro.pwrite(b"z", 0)
    ro.close()


def test_a_dup_survives_the_original_being_closed(fs: FileSystem, tmp_path: Path) -> None:
    f = fs.open(tmp_path / "a", create=True)
    f.pwrite(b"data", 0)
    d = f.dup()
    f.close()
    d.pwrite(b"!", 4)  # same open file: writes land in it
    d.datasync()
    assert d.pread(5, 0) == b"data!"
    fs.unlink(tmp_path / "a")  # unlinked meanwhile: the handle still reads it
    assert d.pread(5, 0) == b"data!"
    d.close()
    assert not fs.exists(tmp_path / "a")


def test_rename_replaces_the_target(fs: FileSystem, tmp_path: Path) -> None:
    for name, data in (("a", b"new"), ("b", b"old")):
        f = fs.open(tmp_path / name, create=True)
        f.pwrite(data, 0)
        f.close()
    fs.rename(tmp_path / "a", tmp_path / "b")
    assert fs.read(tmp_path / "b") == b"new"
    assert not fs.exists(tmp_path / "a")
    with pytest.raises(FileNotFoundError):
        fs.rename(tmp_path / "a", tmp_path / "c")
    fs.fsync_dir(tmp_path)


def test_unlink_of_a_missing_file_is_not_an_error(fs: FileSystem, tmp_path: Path) -> None:
    fs.open(tmp_path / "a", create=True).close()
    fs.unlink(tmp_path / "a")
    assert not fs.exists(tmp_path / "a")
    fs.unlink(tmp_path / "a")


def test_directories(fs: FileSystem, tmp_path: Path) -> None:
    d = tmp_path / "x" / "y"
    fs.mkdir(d)
    fs.mkdir(d)  # existing: fine
    fs.open(d / "f", create=True).close()
    fs.mkdir(d / "z")
    assert sorted(fs.listdir(d)) == ["f", "z"]
    assert fs.exists(d / "z")
    fs.fsync_dir(d)
    fs.remove_tree(tmp_path / "x")
    assert not fs.exists(tmp_path / "x")
    fs.remove_tree(tmp_path / "x")  # missing: fine
    with pytest.raises(FileNotFoundError):
        fs.listdir(tmp_path / "x")


def test_stat_reports_the_modification_time(tmp_path: Path) -> None:
    fs = OsFileSystem()  # the simulated disk's times are its clock's (tests/sim/test_sim_disk.py)
    fs.open(tmp_path / "a", create=True).close()
    os.utime(tmp_path / "a", ns=(0, 1_234_567_000_000))
    assert fs.stat(tmp_path / "a").mtime_ms == 1_234_567


# ---- injection ---------------------------------------------------------------------------------------
def _keyed(i: int) -> bytes:
    return build_batch_from_messages([(b"k", b"v%d" % i, (), 1000 + i)])


def _files_in(directory: Path) -> set[Path]:
    return {p for p in directory.rglob("*") if p.is_file()}


def _made(fs: RecordingFileSystem) -> set[Path]:
    return {p for op, p in fs.calls if op in ("create", "renamed-to")}


def test_a_partition_log_does_every_file_operation_through_its_file_system(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    d = tmp_path / "t-0"
    size = len(_keyed(0))
    cfg = LogConfig(segment_bytes=size * 3, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = PartitionLog.open(d, cfg, now_ms=ManualClock(1_000_000).now_ms, fs=fs)
    for i in range(10):  # three rolls
        log.append(_keyed(i), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    active = d / (segment_name(9) + ".log")
    assert "pwritev" in fs.ops(active)
    sync = log.begin_sync()  # group commit's fdatasync of the data, on a dup of the segment file
    assert sync is not None
    sync.run()
    log.end_sync(sync)
    assert "datasync" in fs.ops(active) and "dup" in fs.ops(active)
    assert log.read(0, 1 << 20).data and "pread" in fs.ops(d / (segment_name(0) + ".log"))
    log.flush()
    assert "sync" in fs.ops(active) and "fsync_dir" in fs.ops(d)
    stats = cleaner.clean(log, now_ms=1_000_000)  # staging directory, swap, checkpoint
    assert stats.cleaned and "rename" in [op for op, _ in fs.calls]
    log.roll()
    log.apply_retention()
    log.close()
    assert _files_in(d) and _files_in(d) <= _made(fs)  # nothing was created behind its back

    fs.calls.clear()
    again = PartitionLog.open(d, cfg, now_ms=ManualClock(1_000_000).now_ms, fs=fs)
    assert again.log_end_offset == 10
    assert again.read(9, 1 << 20).data
    assert ("listdir", d) in fs.calls and "read" in [op for op, _ in fs.calls]
    again.delete()
    assert ("remove_tree", d) in fs.calls and not d.exists()


def test_the_quorum_store_does_every_file_operation_through_its_file_system(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    d = tmp_path / "q"
    store = QuorumStore(d, fs)
    store.load()
    store.persist(Ready(hard_state=(1, 1), truncate_to=None, entries=(Entry(0, 1, b"a"), Entry(1, 1, b"b")),
                        snapshot=None, messages=(), restore=None, committed=()))
    assert "sync" in fs.ops(d / "log") and "fsync_dir" in fs.ops(d)
    assert _files_in(d) <= _made(fs)
    assert [e.data for e in QuorumStore(d, fs).load().entries] == [b"a", b"b"]


def test_a_broker_hands_its_file_system_to_its_logs_and_metadata_store(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    server = BrokerServer(BrokerConfig(data_dir=str(tmp_path)), fs=fs)
    assert server.quorum.store.fs is fs
    tid = uuid.uuid4()
    node = server.cfg.node_id
    server.topics.apply_image(MetadataImage().apply(1, TopicRecord(name="t", topic_id=tid)).apply(
        2, PartitionRecord(partition_id=0, topic_id=tid, replicas=[node], isr=[node], leader=node)))
    part = server.topics.partition("t", 0)  # no event loop here: opened at once
    assert part is not None and part._log.fs is fs
    part.close()
    assert _files_in(tmp_path / "t-0") <= _made(fs)
    server.topics.group_commit.close()


def test_the_topic_table_removes_orphaned_partitions_through_its_file_system(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    table = TopicTable(BrokerConfig(data_dir=str(tmp_path)), SystemClock(), fs)
    table.load()
    for name in ("gone-0", "__cluster_metadata-0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_bytes(b"x")
    table.remove_orphans()  # the (empty) image assigns nothing here
    assert ("listdir", tmp_path) in fs.calls and ("remove_tree", tmp_path / "gone-0") in fs.calls
    assert not (tmp_path / "gone-0").exists()
    assert (tmp_path / "__cluster_metadata-0" / "f").exists()  # the metadata log is not a partition of a topic
    table.group_commit.close()
