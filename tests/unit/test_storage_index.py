"""Offset, time and transaction indexes; checkpoint files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from helpers.recording_fs import RecordingFileSystem

from storage.checkpoint import CheckpointFile, OffsetCheckpoint, atomic_write
from storage.fs import OS_FS
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex
from storage.txn_index import AbortedTxn, TransactionIndex


def test_offset_index_lookup_persist_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(OS_FS, path, 100, max_entries=1000)
    idx.reset()
    assert idx.lookup(150) == (100, 0)  # empty: the segment start
    for off, pos in ((110, 500), (120, 1000), (135, 1600)):
        idx.append(off, pos)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 500)
    assert idx.lookup(134) == (120, 1000)
    assert idx.lookup(10**9) == (135, 1600)
    with pytest.raises(ValueError):
        idx.append(130, 2000)  # not increasing
    assert path.stat().st_size == 0  # nothing written until persisted
    idx.persist()
    assert path.read_bytes() == struct.pack(">iiiiii", 10, 500, 20, 1000, 35, 1600)
    again = OffsetIndex(OS_FS, path, 100, max_entries=1000)
    assert again.lookup(125) == (120, 1000) and again.load() is None
    again.truncate_to_offset(120)
    assert again.last_entry() == (110, 500)
    assert path.stat().st_size == 8
    again.append(111, 600)
    again.truncate_to_position(600)
    assert len(again) == 1


def test_offset_index_detects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiii", 50, 10, 20, 5))
    assert OffsetIndex(OS_FS, path, 0, 100).load() is not None
    path.write_bytes(b"\x00" * 13)
    idx = OffsetIndex(OS_FS, path, 0, 100)
    assert not idx.file_looks_sane()
    assert idx.load() is not None


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    ti = TimeIndex(OS_FS, path, 0, max_entries=100)
    ti.reset()
    assert ti.lookup(5) == (-1, 0)
    ti.maybe_append(1000, 0)
    ti.maybe_append(1000, 5)  # not a new maximum: ignored
    ti.maybe_append(900, 6)
    ti.maybe_append(2000, 7)
    assert ti.lookup(999) == (-1, 0)
    assert ti.lookup(1500) == (1000, 0)
    assert ti.lookup(2000) == (2000, 7)
    ti.persist()
    assert path.stat().st_size == 24
    fresh = TimeIndex(OS_FS, path, 0, max_entries=100)
    assert fresh.peek_last_timestamp() == 2000
    assert fresh.last_entry() == (2000, 7)
    fresh.truncate_to_offset(7)
    assert fresh.last_entry() == (1000, 0)


def test_txn_index_collect(tmp_path: Path) -> None:
    path = tmp_path / "t.txnindex"
    ti = TransactionIndex(OS_FS, path)
    ti.reset()
    ti.append(AbortedTxn(1, 0, 10, 11))
    ti.append(AbortedTxn(2, 5, 20, 21))
    ti.append(AbortedTxn(3, 30, 40, 100))
    ti.append(AbortedTxn(4, 101, 110, 111))
    assert path.stat().st_size == 4 * 34
    found, complete = TransactionIndex(OS_FS, path).collect(8, 35)
    assert [t.producer_id for t in found] == [1, 2, 3] and complete
    found, complete = ti.collect(11, 15)
    assert [t.producer_id for t in found] == [2] and complete  # lso 21 >= 15
    found, complete = ti.collect(200, 300)
    assert found == [] and not complete
    ti.truncate_to(40)
    assert [t.producer_id for t in TransactionIndex(OS_FS, path).entries] == [1, 2]
    with open(path, "ab") as f:
        f.write(b"\x00" * 5)  # torn append
    again = TransactionIndex(OS_FS, path)
    assert len(again.entries) == 2
    again.append(AbortedTxn(9, 50, 60, 61))
    assert [t.producer_id for t in TransactionIndex(OS_FS, path).entries] == [1, 2, 9]


def test_checkpoint_versioned_and_atomic(tmp_path: Path) -> None:
    f = CheckpointFile(OS_FS, tmp_path / "leader-epoch-checkpoint", 2)
    assert f.read() == []
    f.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert f.read() == [(0, 0), (3, 120)]
    assert not list(tmp_path.glob("*.tmp"))
    for bad in ("", "0\n", "1\n1\n5\n", "0\n3\n1 2\n", "0\n1\nx y\n", "0\n1\n1 2 3\n"):
        (tmp_path / "leader-epoch-checkpoint").write_text(bad)
        assert f.read() == [], bad
    rp = OffsetCheckpoint(OS_FS, tmp_path / "recovery-point-offset-checkpoint")
    assert rp.read() is None
    rp.write(42)
    assert rp.read() == 42
    rp.write(43, durable=False)
    assert rp.read() == 43


def test_atomic_write_leaves_old_content_when_interrupted(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(OS_FS, target, b"old")

    def crash_before_rename(op: str, path: Path) -> None:
        if op == "rename":
            raise OSError("crash before rename")

    with pytest.raises(OSError):
        atomic_write(RecordingFileSystem(fault=crash_before_rename), target, b"new")
    assert target.read_bytes() == b"old"
