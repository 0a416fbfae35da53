"""Crash recovery: torn tails, corrupt batches, lost indexes, the recovery point, real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from _batches import idem, make_batch

from protocol.batch import iter_batches
from storage import LogConfig, PartitionLog

UNIT_DIR = Path(__file__).resolve().parent
REPO = UNIT_DIR.parent.parent


def crash(log: PartitionLog) -> None:
    """Drop the log as a killed process would: no flush, no checkpoint, fds just closed."""
    for seg in log._segments:
        seg._close_file()
    log._closed = True


def cfg(**kw: object) -> LogConfig:
    return LogConfig(**kw)  # type: ignore[arg-type]


def all_bases(log: PartitionLog) -> list[int]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 20)
        out.extend(h.base_offset for _, h in iter_batches(r.data))
        offset = r.next_offset
    return out


def fill(log: PartitionLog, n: int) -> None:
    for i in range(n):
        log.append(make_batch(2, timestamp=1000 + i), leader_epoch=1)
    log.high_watermark = log.log_end_offset


def last_log_file(d: Path) -> Path:
    return sorted(d.glob("*.log"))[-1]


def test_torn_tail_recovers_to_last_whole_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg(segment_bytes=1000, index_interval_bytes=50))
    fill(log, 30)
    crash(log)
    f = last_log_file(d)
    size = f.stat().st_size
    os.truncate(f, size - 10)  # the last batch is cut in the middle
    log = PartitionLog.open(d, cfg(segment_bytes=1000, index_interval_bytes=50))
    assert log.log_end_offset == 58
    assert log.recovery_stats.bytes_truncated > 0
    assert all_bases(log) == list(range(0, 58, 2))
    assert log.append(make_batch(1), leader_epoch=2).first_offset == 58
    log.close()
    log = PartitionLog.open(d, cfg(segment_bytes=1000, index_interval_bytes=50))
    assert log.log_end_offset == 59
    assert log.recovery_stats.batches_validated == 0  # clean shutdown: nothing re-read


def test_flipped_byte_drops_that_batch_and_everything_after(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    one = len(make_batch(2))
    log = PartitionLog.open(d, cfg(segment_bytes=one * 5))
    fill(log, 12)  # segments at 0, 10, 20 (5 batches each) ...
    crash(log)
    assert sorted(p.name[:20] for p in d.glob("*.log")) == [f"{b:020d}" for b in (0, 10, 20)]
    seg = d / f"{10:020d}.log"
    data = bytearray(seg.read_bytes())
    data[one * 2 + 70] ^= 0x40  # inside the third batch of the second segment (offsets 14-15)
    seg.write_bytes(bytes(data))
    log = PartitionLog.open(d, cfg(segment_bytes=one * 5))
    assert log.log_end_offset == 14
    assert all_bases(log) == list(range(0, 14, 2))
    assert log.segment_base_offsets == [0, 10]  # the later segment went too
    assert log.recovery_stats.segments_deleted == 1
    assert log.append(make_batch(1), leader_epoch=1).first_offset == 14


def test_garbage_tail_and_zero_fill(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg())
    fill(log, 5)
    crash(log)
    with open(last_log_file(d), "ab") as f:
        f.write(b"\x00" * 4096)  # a file extended by the crash but never written
    log = PartitionLog.open(d, cfg())
    assert log.log_end_offset == 10 and all_bases(log) == [0, 2, 4, 6, 8]


def test_missing_or_garbage_index_files_are_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    config = cfg(segment_bytes=2000, index_interval_bytes=100)
    log = PartitionLog.open(d, config)
    fill(log, 100)
    expected = all_bases(log)
    expected_ts = [log.offset_for_timestamp(t) for t in (1000, 1050, 1099)]
    log.close()
    first_index = d / f"{0:020d}.index"
    first_time = d / f"{0:020d}.timeindex"
    good_index = first_index.read_bytes()
    assert len(good_index) > 16
    first_index.unlink()
    log = PartitionLog.open(d, config)
    assert log.recovery_stats.recovery_point == 0  # moved back to the segment missing its index
    assert all_bases(log) == expected
    log.close()
    assert first_index.read_bytes() == good_index

    # garbage of a plausible size: caught when loaded or when an entry does not match the log
    mid = sorted(d.glob("*.index"))[1]
    mid.write_bytes(os.urandom(mid.stat().st_size))
    first_time.write_bytes(os.urandom(first_time.stat().st_size))
    log = PartitionLog.open(d, config)
    assert all_bases(log) == expected
    assert [log.offset_for_timestamp(t) for t in (1000, 1050, 1099)] == expected_ts

    # an index whose entries are sorted but point at the wrong batches
    log.close()
    idx = sorted(d.glob("*.index"))[1]
    n = idx.stat().st_size // 8
    import struct
    idx.write_bytes(b"".join(struct.pack(">ii", 1 + i, 7 + i * 13) for i in range(n)))
    log = PartitionLog.open(d, config)
    assert all_bases(log) == expected


def test_recovery_only_rescans_after_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    config = cfg(segment_bytes=1500, index_interval_bytes=100)
    log = PartitionLog.open(d, config)
    fill(log, 40)
    log.flush()
    log.checkpoint()
    rp = log.recovery_point
    assert rp == 80
    for _ in range(7):
        log.append(make_batch(2), leader_epoch=1)
    crash(log)
    log = PartitionLog.open(d, config)
    stats = log.recovery_stats
    assert stats.recovery_point == rp
    assert stats.batches_validated == 7
    assert log.log_end_offset == 94
    assert all_bases(log) == list(range(0, 94, 2))
    log.close()

    # proof that the trusted part is not re-read: damage below the recovery point goes unseen
    log = PartitionLog.open(d, config)
    assert log.recovery_stats.batches_validated == 0
    log.close()
    first = d / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[100] ^= 1
    first.write_bytes(bytes(data))
    log = PartitionLog.open(d, config)
    assert log.log_end_offset == 94 and log.recovery_stats.bytes_truncated == 0


def test_producer_state_survives_crash_via_snapshot_and_replay(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    one = len(idem(0, 2))
    config = cfg(segment_bytes=one * 4)
    log = PartitionLog.open(d, config)

    def state(log: PartitionLog) -> dict[int, tuple[int, list[object]]]:
        return {pid: (e.epoch, list(e.batches)) for pid, e in log.producer_state.active_producers.items()}

    for i in range(10):
        log.append(idem(i * 2, 2, pid=1), leader_epoch=0)
        log.append(idem(i, 1, pid=2, epoch=3), leader_epoch=0)
        if i == 6:
            log.flush()
            log.checkpoint()
    before = state(log)
    assert list(d.glob("*.snapshot"))  # taken at rolls
    crash(log)
    log = PartitionLog.open(d, config)
    assert state(log) == before
    stats = log.recovery_stats
    assert stats.producer_snapshot is not None and 0 < stats.producer_snapshot <= stats.recovery_point
    assert stats.batches_replayed + stats.batches_validated < 20
    # no usable snapshot at all: a full replay gives the same state
    for snap in d.glob("*.snapshot"):
        snap.write_bytes(b"garbage")
    crash(log)
    log = PartitionLog.open(d, config)
    assert state(log) == before and log.recovery_stats.producer_snapshot is None
    # a retry of the last batch is still recognised after the crash
    r = log.append(idem(18, 2, pid=1), leader_epoch=0)
    assert r.duplicate and r.first_offset == 27


def test_sigkill_during_flushed_appends_loses_nothing_acknowledged(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(REPO)!r}, {str(UNIT_DIR)!r}]
        from pathlib import Path
        from _batches import make_batch
        from storage import LogConfig, PartitionLog
        log = PartitionLog.open(Path({str(d)!r}), LogConfig(flush_messages=1, segment_bytes=20_000))
        batch = make_batch(3, value_size=300)
        while True:
            r = log.append(batch, leader_epoch=0)
            log.maybe_flush()  # the flush policy's flush before the acknowledgement, as the broker does
            print(r.last_offset, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    acked = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if not line.strip().isdigit():
                continue  # a log line, not an acknowledgement
            acked.append(int(line))
            if len(acked) >= 150:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(acked) >= 150, "writer died early"
    log = PartitionLog.open(d, cfg(segment_bytes=20_000))
    assert log.log_end_offset >= acked[-1] + 1
    log.high_watermark = log.log_end_offset
    readable = set()
    for b in all_bases(log):
        readable.update(range(b, b + 3))
    assert set(acked) <= readable
    assert all_bases(log) == list(range(0, log.log_end_offset, 3))


def test_revalidating_a_segment_keeps_its_aborted_transactions(tmp_path: Path) -> None:
    from _batches import make_marker

    from storage import AbortedTransaction

    d = tmp_path / "t-0"
    config = cfg(index_interval_bytes=50)

    def txn(pid: int, seq: int) -> bytes:
        return make_batch(2, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)

    log = PartitionLog.open(d, config)
    log.append(txn(1, 0), leader_epoch=0)  # 0-1
    log.append(make_marker(1, 0, abort=True), leader_epoch=0)  # 2
    log.flush()
    log.checkpoint()  # recovery point 3, in the middle of the only segment
    log.append(txn(2, 0), leader_epoch=0)  # 3-4
    log.append(make_marker(2, 0, abort=True), leader_epoch=0)  # 5
    expected = [AbortedTransaction(1, 0), AbortedTransaction(2, 3)]
    assert log.aborted_transactions(0, 6) == expected
    crash(log)
    (d / f"{0:020d}.index").write_bytes(b"\x00\x00\x00\x05")  # torn: forces a full re-validation
    log = PartitionLog.open(d, config)
    assert log.recovery_stats.batches_validated == 4
    assert log.aborted_transactions(0, 6) == expected
    assert (d / f"{0:020d}.txnindex").stat().st_size == 2 * 34
