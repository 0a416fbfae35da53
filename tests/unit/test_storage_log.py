"""PartitionLog: append/read, offsets, rolls, retention, timestamps, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _batches import make_batch

from protocol.batch import TIMESTAMP_TYPE_MASK, compute_crc, iter_batches
from protocol.errors import ErrorCode, KafkaError
from storage import LogConfig, PartitionLog, UnexpectedAppendOffsetError
from storage.segment import LogSegment


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, clock: Clock | None = None, **cfg: object) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**cfg), now_ms=clock or Clock())  # type: ignore[arg-type]


def bases(data: bytes | memoryview) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def append_n(log: PartitionLog, n: int, count: int = 1, **kw: object) -> list[int]:
    firsts = []
    for _ in range(n):
        firsts.append(log.append(make_batch(count, **kw), leader_epoch=0).first_offset)  # type: ignore[arg-type]
    log.high_watermark = log.log_end_offset
    return firsts


def test_round_trip_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    r1 = log.append(make_batch(3), leader_epoch=5)
    r2 = log.append(make_batch(2) + make_batch(4), leader_epoch=5)
    assert (r1.first_offset, r1.last_offset) == (0, 2)
    assert (r2.first_offset, r2.last_offset) == (3, 8)
    assert r1.log_append_time == -1 and not r1.duplicate
    assert log.log_end_offset == 9
    log.high_watermark = 9
    out = log.read(0, 1 << 20)
    headers = [h for _, h in iter_batches(out.data)]
    assert [h.base_offset for h in headers] == [0, 3, 5]
    assert all(h.partition_leader_epoch == 5 for h in headers)
    # the CRC still holds: base offset and epoch are outside it
    for pos, h in iter_batches(out.data):
        assert compute_crc(out.data, pos, h.size) == h.crc
    assert (out.first_offset, out.next_offset) == (0, 9)
    assert log.leader_epochs == [(5, 0)]
    log.append(make_batch(1), leader_epoch=6)
    assert log.leader_epochs == [(5, 0), (6, 9)]
    assert log.end_offset_for_epoch(5) == (5, 9)
    assert log.end_offset_for_epoch(6) == (6, 10)
    log.close()


def test_read_from_mid_batch_returns_containing_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=50)
    append_n(log, 20, count=5)
    for offset in (0, 3, 47, 52, 99):
        out = log.read(offset, 1)
        assert bases(out.data) == [offset - offset % 5]
        assert out.next_offset == offset - offset % 5 + 5
    assert log.read(100, 1000).data == b""
    with pytest.raises(KafkaError) as e:
        log.read(101, 1000)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_max_bytes_and_first_batch_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(make_batch(1, value_size=5000), leader_epoch=0)
    small = make_batch(1)
    for _ in range(5):
        log.append(small, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    out = log.read(0, 10)  # far below the first batch's size: still one whole batch
    assert bases(out.data) == [0]
    assert len(out.data) > 5000
    out = log.read(1, len(small) * 2 + 5)  # two whole batches fit, the third would not
    assert bases(out.data) == [1, 2]
    assert len(out.data) == 2 * len(small)


def test_upper_bound(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append_n(log, 10, count=2)
    out = log.read(0, 1 << 20, upper_bound=6)
    assert bases(out.data) == [0, 2, 4]
    assert log.read(6, 1 << 20, upper_bound=6).data == b""
    # a batch straddling the bound is held back whole
    assert bases(log.read(0, 1 << 20, upper_bound=5).data) == [0, 2]


def test_roll_by_size_and_reads_across_segments(tmp_path: Path) -> None:
    size = len(make_batch(1))
    log = open_log(tmp_path / "t-0", segment_bytes=size * 4, index_interval_bytes=1)
    append_n(log, 10)
    assert log.segment_base_offsets == [0, 4, 8]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000004.log", "00000000000000000008.log"]
    # one segment per read, continuing into the next when the offset is at a segment end
    assert bases(log.read(2, 1 << 20).data) == [2, 3]
    assert bases(log.read(4, 1 << 20).data) == [4, 5, 6, 7]
    assert [bases(log.read(o, 1).data) for o in range(10)] == [[o] for o in range(10)]


def test_roll_by_age_uses_record_time_else_clock(tmp_path: Path) -> None:
    clock = Clock(10_000)
    log = open_log(tmp_path / "t-0", clock, segment_ms=1000)
    log.append(make_batch(1, timestamp=10_000), leader_epoch=0)
    log.append(make_batch(1, timestamp=10_900), leader_epoch=0)
    assert log.segment_base_offsets == [0]
    log.append(make_batch(1, timestamp=11_001), leader_epoch=0)
    assert log.segment_base_offsets == [0, 2]
    # batches without timestamps: the wall clock decides
    log2 = open_log(tmp_path / "u-0", clock, segment_ms=1000)
    log2.append(make_batch(1, timestamp=-1), leader_epoch=0)
    clock.now += 500
    log2.append(make_batch(1, timestamp=-1), leader_epoch=0)
    assert log2.segment_base_offsets == [0]
    clock.now += 600
    log2.append(make_batch(1, timestamp=-1), leader_epoch=0)
    assert log2.segment_base_offsets == [0, 2]


def test_retention_by_size(tmp_path: Path) -> None:
    size = len(make_batch(1))
    log = open_log(tmp_path / "t-0", segment_bytes=size * 2, retention_bytes=size * 5)
    append_n(log, 10)  # 5 segments of 2 batches
    assert len(log.segment_base_offsets) == 5
    deleted = log.apply_retention()
    # 10 batches, keep at most 5 batches' worth, whole segments only: drop 0-1, 2-3
    assert deleted == 2
    assert log.segment_base_offsets == [4, 6, 8]
    assert log.log_start_offset == 4
    with pytest.raises(KafkaError):
        log.read(3, 100)
    assert bases(log.read(4, 1).data) == [4]
    # the active segment is never deleted, even when alone over the limit
    tiny = open_log(tmp_path / "u-0", retention_bytes=0)
    append_n(tiny, 3)
    assert tiny.apply_retention() == 0


def test_retention_by_age_and_high_watermark(tmp_path: Path) -> None:
    size = len(make_batch(1))
    clock = Clock(100_000)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=size * 2, retention_ms=10_000)
    for ts in (1000, 2000, 50_000, 60_000, 95_000, 96_000):
        log.append(make_batch(1, timestamp=ts), leader_epoch=0)
    assert log.segment_base_offsets == [0, 2, 4]
    log.high_watermark = 2  # only data below the high watermark may go
    assert log.apply_retention(100_000) == 1
    log.high_watermark = log.log_end_offset
    assert log.apply_retention(100_000) == 1  # segment 2 (max ts 60 000) is older than 10 s
    assert log.segment_base_offsets == [4]
    assert log.log_start_offset == 4


def test_offset_for_timestamp(tmp_path: Path) -> None:
    size = len(make_batch(1))
    log = open_log(tmp_path / "t-0", segment_bytes=size * 10, index_interval_bytes=1)
    stamps = [100, 200, 200, 150, 300, 400, 400, 500, 450, 600, 700, 800, 900]
    for ts in stamps * 3:
        log.append(make_batch(1, timestamp=ts), leader_epoch=0)
    ts_all = stamps * 3
    for target in (0, 100, 101, 200, 250, 450, 460, 900, 901):
        expected = next(((i, ts) for i, ts in enumerate(ts_all) if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=size * 10, index_interval_bytes=1)
    assert log.offset_for_timestamp(650) == (10, 700)
    # after retention the answer never points below the log start
    log.high_watermark = log.log_end_offset
    log.delete_records_before(5)
    assert log.offset_for_timestamp(0) == (5, 400)


def test_log_append_time(tmp_path: Path) -> None:
    clock = Clock(777_000)
    log = open_log(tmp_path / "t-0", clock, message_timestamp_type="LogAppendTime")
    r = log.append(make_batch(3, timestamp=5), leader_epoch=0)
    assert r.log_append_time == 777_000
    log.high_watermark = log.log_end_offset
    data = log.read(0, 1000).data
    (pos, h), = list(iter_batches(data))
    assert h.max_timestamp == 777_000 and h.attributes & TIMESTAMP_TYPE_MASK
    assert compute_crc(data, pos, h.size) == h.crc


def test_truncate_then_append(tmp_path: Path) -> None:
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", segment_bytes=size * 3, index_interval_bytes=1)
    append_n(log, 10, count=2)  # offsets 0..19, segments at 0, 6, 12, 18
    log.truncate_to(13)  # mid-batch: the batch 12-13 goes whole
    assert log.log_end_offset == 12
    assert log.segment_base_offsets == [0, 6, 12]
    assert log.high_watermark == 12
    r = log.append(make_batch(1), leader_epoch=1)
    assert r.first_offset == 12
    log.high_watermark = log.log_end_offset
    assert bases(log.read(6, 1 << 20).data) == [6, 8, 10]
    assert bases(log.read(12, 1 << 20).data) == [12]
    log.truncate_to(8)
    assert log.log_end_offset == 8 and log.segment_base_offsets == [0, 6]
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=size * 3, index_interval_bytes=1)
    assert log.log_end_offset == 8
    assert log.append(make_batch(1), leader_epoch=2).first_offset == 8


def test_truncate_fully_and_delete_records(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    append_n(log, 10)
    with pytest.raises(KafkaError):
        log.delete_records_before(log.high_watermark + 1)
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    assert log.segment_base_offsets[0] <= 5 < (log.segment_base_offsets + [99])[1]
    with pytest.raises(KafkaError):
        log.read(4, 100)
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    assert log.log_start_offset == 5
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (100, 100, [100])
    assert log.append(make_batch(1), leader_epoch=0).first_offset == 100
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    assert (log.log_start_offset, log.log_end_offset) == (100, 101)


class Crash(Exception):
    """The process dying at a chosen point (the object is then abandoned, never closed)."""


def test_delete_records_start_is_durable_before_any_segment_goes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(make_batch(1))
    log = open_log(tmp_path / "t-0", segment_bytes=size * 3, index_interval_bytes=1)
    append_n(log, 12)  # segments at 0, 3, 6, 9
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(-1)  # the API's -1 is the caller's to resolve
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # crash after the first covered segment is removed, before the second
    real_retire = LogSegment.retire
    deleted: list[int] = []

    def retire_then_crash(seg: LogSegment) -> list[Path]:
        if deleted:
            raise Crash
        deleted.append(seg.base_offset)
        return real_retire(seg)

    monkeypatch.setattr(LogSegment, "retire", retire_then_crash)
    with pytest.raises(Crash):
        log.delete_records_before(7)
    monkeypatch.undo()
    assert deleted == [0]
    # without a close: what a SIGKILL leaves. The start is 7, not the base of the first segment left.
    again = open_log(tmp_path / "t-0", segment_bytes=size * 3, index_interval_bytes=1)
    assert again.log_start_offset == 7
    assert again.segment_base_offsets == [3, 6, 9]
    with pytest.raises(KafkaError):
        again.read(6, 1000)
    assert bases(again.read(7, 1000).data)[0] == 7
    # retention finishes what the crash interrupted
    again.high_watermark = again.log_end_offset
    assert again.apply_retention() == 1
    assert again.segment_base_offsets == [6, 9] and again.log_start_offset == 7


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0")
    leader.append(make_batch(2), leader_epoch=3)
    leader.append(make_batch(3), leader_epoch=4)
    leader.high_watermark = leader.log_end_offset
    data = bytes(leader.read(0, 1 << 20).data)
    follower = open_log(tmp_path / "f-0")
    r = follower.append(data, leader_epoch=4, assign_offsets=False)
    assert (r.first_offset, r.last_offset) == (0, 4)
    assert follower.leader_epochs == [(3, 0), (4, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append(data, leader_epoch=4, assign_offsets=False)
    follower.high_watermark = 5
    assert bytes(follower.read(0, 1 << 20).data) == data


def test_bad_input_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    with pytest.raises(KafkaError):
        log.append(make_batch(1)[:-3], leader_epoch=0)
    with pytest.raises(KafkaError) as e:
        log.append(make_batch(1, value_size=2000), leader_epoch=0)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError):
        log.append(b"", leader_epoch=0)
    assert log.log_end_offset == 0


def test_no_fsync_on_append_path_the_policy_says_when_to_flush(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 24: the append never fsyncs (the broker runs the policy's flush on its I/O thread);
    # flush_due says when the policy wants one, maybe_flush runs it here.
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    size = len(make_batch(1))
    lazy = open_log(tmp_path / "a-0", segment_bytes=size * 2)
    calls.clear()
    append_n(lazy, 7)  # includes three rolls
    assert calls == [] and not lazy.flush_due()
    eager = open_log(tmp_path / "b-0", flush_messages=1)
    calls.clear()
    eager.append(make_batch(1), leader_epoch=0)
    assert calls == [] and eager.flush_due()
    eager.maybe_flush()
    assert calls  # log (and indexes) fsynced
    assert eager.recovery_point == 1 and not eager.flush_due()
    clock = Clock(0)
    timed = open_log(tmp_path / "c-0", clock, flush_ms=1000)
    calls.clear()
    timed.append(make_batch(1), leader_epoch=0)
    assert not timed.flush_due()
    clock.now = 1500
    timed.append(make_batch(1), leader_epoch=0)
    assert calls == [] and timed.flush_due()
    timed.maybe_flush()
    assert calls and timed.recovery_point == 2
    timed.append(make_batch(1), leader_epoch=0)
    clock.now = 2600  # no append comes: the broker's housekeeping flushes
    assert timed.flush_due()
    timed.maybe_flush()
    assert timed.recovery_point == 3


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append_n(log, 3)
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_restart_keeps_offsets_checkpoints_and_cleans_leftovers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    size = len(make_batch(1))
    log = open_log(d, segment_bytes=size * 3)
    log.append(make_batch(1), leader_epoch=1)
    log.append(make_batch(1), leader_epoch=2)
    append_n(log, 5)
    log.high_watermark = 4
    log.close()
    (d / "recovery-point-offset-checkpoint.tmp").write_text("junk")
    (d / f"{999:020d}.index").write_bytes(b"")  # an index without its log
    log = open_log(d, segment_bytes=size * 3)
    assert not list(d.glob("*.tmp")) and not (d / f"{999:020d}.index").exists()
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (7, 4, 7)
    assert log.leader_epochs == [(1, 0), (2, 1)]  # an older epoch (0) never re-enters the history
    log.truncate_to(1)
    assert log.leader_epochs == [(1, 0)]
    assert log.end_offset_for_epoch(2) == (-1, -1)
    log.close()
    assert PartitionLog.open(d, LogConfig(segment_bytes=size * 3)).leader_epochs == [(1, 0)]


def test_retention_removes_old_snapshots(tmp_path: Path) -> None:
    from _batches import idem
    d = tmp_path / "t-0"
    size = len(idem(0))
    log = open_log(d, segment_bytes=size * 2, retention_bytes=size * 2)
    for i in range(8):
        log.append(idem(i), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    snaps = sorted(int(p.name[:20]) for p in d.glob("*.snapshot"))
    assert snaps == [2, 4, 6]
    log.apply_retention()
    assert log.segment_base_offsets == [6]
    assert sorted(int(p.name[:20]) for p in d.glob("*.snapshot")) == [6]
    assert log.producer_state.get(7).last_seq == 7  # type: ignore[union-attr]


def test_retention_renames_segments_and_leaves_the_unlink_to_the_caller(tmp_path: Path) -> None:
    """Unlinking large files can be slow: the log only renames them (*.deleted), the housekeeper
    unlinks them in a worker thread, and a start after a crash removes what is left."""
    size = len(make_batch(1))
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=size * 2, retention_bytes=size * 2)
    append_n(log, 6)  # segments at 0, 2, 4
    assert log.apply_retention() == 2
    retired = log.take_retired_files()
    assert {p.name for p in retired} >= {"00000000000000000000.log.deleted", "00000000000000000002.log.deleted"}
    assert all(p.exists() and p.name.endswith(".deleted") for p in retired)
    assert not (d / "00000000000000000000.log").exists()
    assert log.take_retired_files() == []  # taken once
    # a crash before the unlink: the next open removes the leftovers and keeps the log
    again = open_log(d, segment_bytes=size * 2, retention_bytes=size * 2)
    assert not any(p.exists() for p in retired)
    assert again.log_start_offset == 4 and again.log_end_offset == 6


def test_a_follower_log_start_follows_the_leader_past_its_high_watermark(tmp_path: Path) -> None:
    """A follower learns the leader's high watermark one fetch late, so the leader's log start
    (never above the leader's HW) can be above the follower's HW: the follower's start moves
    anyway, its HW with it (everything below the leader's start was committed there); a start
    past the follower's log end empties the log and starts it there."""
    log = open_log(tmp_path / "f-0")
    log.append(make_batch(10), leader_epoch=0)
    log.high_watermark = 5
    assert log.follow_log_start(8) == 8
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (8, 8, 10)
    assert log.follow_log_start(6) == 8  # never back
    assert log.follow_log_start(12) == 12
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (12, 12, 12)
    log.close()
    again = open_log(tmp_path / "f-0")
    assert again.log_start_offset == 12
