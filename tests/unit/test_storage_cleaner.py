"""Log compaction (storage/cleaner.py): what survives, transactions, tombstones, crash safety."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from protocol import compression
from protocol.batch import DELETE_HORIZON_FLAG, BatchHeader
from protocol.records import (
    DecodedRecord,
    build_batch_from_messages,
    build_control_batch,
    decode_batches,
)
from storage import AbortedTransaction, LogConfig, PartitionLog, segment_swap
from storage.cleaner import CLEANER_CHECKPOINT_FILE, clean

UNIT_DIR = Path(__file__).resolve().parent
REPO = UNIT_DIR.parent.parent
T0 = 1_700_000_000_000
DAY = 86_400_000

KV = tuple[bytes | None, bytes | None]


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, **cfg: object) -> PartitionLog:
    cfg.setdefault("cleanup_policy", "compact")
    cfg.setdefault("index_interval_bytes", 100)
    return PartitionLog.open(path, LogConfig(**cfg), now_ms=Clock())  # type: ignore[arg-type]


def kv(*pairs: KV, ts: int = T0, codec: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1,
       txn: bool = False) -> bytes:
    return build_batch_from_messages([(k, v, (), ts + i) for i, (k, v) in enumerate(pairs)], compression=codec,
                                     producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn)


def put(log: PartitionLog, *pairs: KV, **kw: object) -> int:
    """Append one batch and commit it (HW = log end); returns its first offset."""
    r = log.append(kv(*pairs, **kw), leader_epoch=0)  # type: ignore[arg-type]
    log.high_watermark = log.log_end_offset
    return r.first_offset


def marker(log: PartitionLog, pid: int, epoch: int, *, commit: bool) -> int:
    r = log.append(build_control_batch(pid, epoch, commit, 0, T0), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    return r.first_offset


def batches(log: PartitionLog) -> list[tuple[BatchHeader, list[DecodedRecord]]]:
    """Every batch from the log start, reading the way a consumer does (next_offset to next_offset)."""
    out: list[tuple[BatchHeader, list[DecodedRecord]]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        r = log.read(offset, 1 << 16)
        if not r.data:
            break
        out.extend(decode_batches(bytes(r.data), strict=True))
        offset = r.next_offset
    return out


def data_records(log: PartitionLog) -> list[DecodedRecord]:
    return [r for h, recs in batches(log) if not h.is_control for r in recs]


def state(records: Sequence[DecodedRecord]) -> dict[bytes | None, bytes]:
    """key -> value after applying the records in order (a tombstone deletes)."""
    out: dict[bytes | None, bytes] = {}
    for r in records:
        if r.value is None:
            out.pop(r.key, None)
        else:
            out[r.key] = r.value
    return out


def key(i: int) -> bytes:
    return b"k%d" % i


def fill_updates(log: PartitionLog, updates: int, keys: int, per_batch: int = 3) -> None:
    n = 0
    while n < updates:
        put(log, *[(key((n + j) % keys), b"v%d" % (n + j)) for j in range(per_batch)])
        n += per_batch


def force(log: PartitionLog, now: int = T0, **kw: object) -> object:
    return clean(log, now_ms=now, min_cleanable_ratio=0.0, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------


def test_latest_value_per_key_survives_and_older_ones_go(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=2000)
    fill_updates(log, 300, 7)
    log.roll()
    before = data_records(log)
    stats = force(log)
    after = data_records(log)
    assert state(after) == state(before)
    # one record per key is left, and it is the latest one
    latest = {r.key: r.offset for r in before}
    assert sorted((r.key, r.offset) for r in after) == sorted(latest.items())
    assert stats.cleaned and stats.records_removed == len(before) - 7  # type: ignore[attr-defined]


def test_reload_gives_the_same_key_value_map(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    log = open_log(d, segment_bytes=1500)
    rng = random.Random(7)
    for i in range(200):
        k = key(rng.randrange(15))
        put(log, (k, None if rng.random() < 0.15 else b"x%d" % i), (None, b"keyless%d" % i))
    before = state(data_records(log))
    force(log)
    log.close()
    log = open_log(d, segment_bytes=1500)
    log.high_watermark = log.log_end_offset
    records = data_records(log)
    assert state(records) == before
    # keyless records are never compacted away
    assert sum(1 for r in records if r.key is None) == 200
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))


def test_offsets_are_kept_and_reads_skip_gaps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=1200)
    fill_updates(log, 150, 4)
    log.roll()
    before = {r.offset: r for r in data_records(log)}
    force(log)
    survivors = sorted(r.offset for r in data_records(log))
    assert all(before[o].value == r.value for o, r in zip(survivors, data_records(log), strict=True))
    # a fetch at any offset, kept or removed, returns the next kept record first
    for offset in range(log.log_start_offset, log.log_end_offset):
        r = log.read(offset, 1 << 16)
        first = next(rec.offset for _, recs in decode_batches(bytes(r.data)) for rec in recs
                     if rec.offset >= offset)
        assert first == min(o for o in survivors if o >= offset)
    # offset lookups by timestamp still land on a batch
    found = log.offset_for_timestamp(T0)
    assert found is not None and found[0] <= survivors[0]


def test_active_segment_and_its_data_are_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=1000)
    fill_updates(log, 60, 3)
    log.roll()
    put(log, (key(0), b"in-active-1"))
    put(log, (key(0), b"in-active-2"))
    active = log.segments[-1]
    active_bytes = active.log_path.read_bytes()
    force(log)
    assert log.segments[-1].log_path.read_bytes() == active_bytes
    # the older values of key 0 lost to those in the active segment, which both stay
    assert [r.value for r in data_records(log) if r.key == key(0)] == [b"in-active-1", b"in-active-2"]
    assert {r.key for r in data_records(log)} == {key(0), key(1), key(2)}


def test_tombstones_are_kept_for_delete_retention_then_removed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0")
    put(log, (b"a", b"1"), (b"b", b"1"), ts=T0 - 10 * DAY)
    put(log, (b"a", None), ts=T0 - 10 * DAY)  # an old record timestamp must not shorten retention
    log.roll()
    s1 = force(log, now=T0, delete_retention_ms=1000)
    recs = data_records(log)
    assert [(r.key, r.value) for r in recs] == [(b"b", b"1"), (b"a", None)]
    assert s1.next_delete_horizon_ms == T0 + 1000  # type: ignore[attr-defined]
    # the horizon is stamped into the batch; record timestamps are unchanged
    h, tomb = next((h, rs) for h, rs in batches(log) if rs and rs[0].value is None)
    assert h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp == T0 + 1000
    assert tomb[0].timestamp == T0 - 10 * DAY
    # nothing new written and the horizon not reached: no pass
    assert not clean(log, now_ms=T0 + 999, delete_retention_ms=1000).cleaned
    # horizon passed: the pass runs although nothing is dirty, and the tombstone goes
    s3 = clean(log, now_ms=T0 + 1000, delete_retention_ms=1000)
    assert s3.cleaned and s3.tombstones_removed == 1
    assert [(r.key, r.value) for r in data_records(log)] == [(b"b", b"1")]
    assert s3.next_delete_horizon_ms == -1


def test_aborted_data_goes_committed_stays_open_transaction_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=800)
    put(log, (b"x", b"old"))
    put(log, (b"t", b"aborted"), pid=1, epoch=0, seq=0, txn=True)
    put(log, (b"u", b"committed"), pid=2, epoch=0, seq=0, txn=True)
    marker(log, 1, 0, commit=False)
    marker(log, 2, 0, commit=True)
    log.roll()
    open_first = put(log, (b"x", b"from-open-txn"), pid=3, epoch=0, seq=0, txn=True)
    put(log, (b"y", b"after"))
    log.roll()
    put(log, (b"z", b"active"))
    assert log.last_stable_offset == open_first
    before_open = [p.read_bytes() for p in sorted((tmp_path / "c-0").glob("*.log"))][1:]
    stats = force(log)
    recs = [(r.key, r.value) for r in data_records(log)]
    assert (b"t", b"aborted") not in recs
    assert (b"u", b"committed") in recs
    # a value written by a transaction that is still open must not remove what it replaces
    assert (b"x", b"old") in recs and (b"x", b"from-open-txn") in recs
    assert stats.end_offset == open_first and stats.aborted_records_removed == 1  # type: ignore[attr-defined]
    assert [p.read_bytes() for p in sorted((tmp_path / "c-0").glob("*.log"))][1:] == before_open
    # read_committed bookkeeping still consistent: the abort marker and its index entry stay
    # while this pass removed the aborted data
    assert any(h.is_control for h, _ in batches(log))


def test_markers_stay_until_their_data_is_gone_and_delete_retention_passed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=600)
    put(log, (b"k", b"in-txn"), pid=5, epoch=0, seq=0, txn=True)
    m = marker(log, 5, 0, commit=True)
    put(log, (b"k", b"plain"))  # supersedes the transaction's only record
    put(log, (b"q", b"1"), pid=5, epoch=0, seq=1)  # the producer's last batch comes after the marker
    log.roll()

    def marker_headers() -> list[BatchHeader]:
        return [h for h, _ in batches(log) if h.is_control]

    # the transaction's data goes; its marker stays, with a delete horizon stamped
    s1 = force(log, now=T0, delete_retention_ms=1000)
    assert [h.base_offset for h in marker_headers()] == [m]
    assert marker_headers()[0].attributes & DELETE_HORIZON_FLAG
    assert s1.next_delete_horizon_ms == T0 + 1000  # type: ignore[attr-defined]
    assert not any(r.value == b"in-txn" for r in data_records(log))
    force(log, now=T0 + 500, delete_retention_ms=1000)
    assert len(marker_headers()) == 1
    s = clean(log, now_ms=T0 + 1000, delete_retention_ms=1000)  # due by the horizon alone
    assert s.cleaned and marker_headers() == [] and s.markers_removed == 1


def test_commit_marker_stays_while_its_transaction_has_records(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=600)
    put(log, (b"k", b"in-txn"), (b"j", b"in-txn"), pid=5, epoch=0, seq=0, txn=True)
    marker(log, 5, 0, commit=True)
    put(log, (b"k", b"plain"))  # supersedes only one of the transaction's records
    put(log, (b"q", b"1"), pid=5, epoch=0, seq=2)
    log.roll()
    for now in (T0, T0 + 10 * DAY):
        force(log, now=now, delete_retention_ms=1000)
        controls = [h for h, _ in batches(log) if h.is_control]
        assert len(controls) == 1 and not controls[0].attributes & DELETE_HORIZON_FLAG
    assert (b"j", b"in-txn") in [(r.key, r.value) for r in data_records(log)]


def test_aborted_txn_index_entries_follow_their_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=600)
    first = put(log, (b"t", b"aborted"), pid=1, epoch=0, seq=0, txn=True)
    put(log, (b"t", b"plain"))
    marker(log, 1, 0, commit=False)
    put(log, (b"z", b"z"), pid=1, epoch=0, seq=1)
    log.roll()
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTransaction(1, first)]
    force(log, now=T0, delete_retention_ms=1000)
    # the marker survives the pass that removed its data, and so does its index entry
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTransaction(1, first)]
    assert [r.value for r in data_records(log)] == [b"plain", b"z"]
    force(log, now=T0 + 2000, delete_retention_ms=1000)
    assert not any(h.is_control for h, _ in batches(log))
    assert log.aborted_transactions(0, log.log_end_offset) == []


def test_last_batch_of_a_producer_keeps_its_header(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    log = open_log(d, segment_bytes=600)
    put(log, (b"k", b"1"), (b"k", b"2"), (b"k", b"3"), pid=9, epoch=2, seq=0)
    put(log, (b"k", b"overwritten"))
    log.roll()
    force(log)
    kept = [(h, rs) for h, rs in batches(log) if h.producer_id == 9]
    assert len(kept) == 1
    h, rs = kept[0]
    assert rs == [] and h.records_count == 0
    assert (h.base_sequence, h.last_offset_delta, h.producer_epoch) == (0, 2, 2)
    # rebuild producer state from the log alone: the epoch and sequence survived compaction
    log.close()
    for snap in d.glob("*.snapshot"):
        snap.unlink()
    log = open_log(d, segment_bytes=600)
    entry = log.producer_state.get(9)
    assert entry is not None and (entry.epoch, entry.last_seq) == (2, 2)
    retry = kv((b"k", b"1"), (b"k", b"2"), (b"k", b"3"), pid=9, epoch=2, seq=0)
    r = log.append(retry, leader_epoch=0)
    assert r.duplicate and (r.first_offset, r.last_offset) == (0, 2)  # the compacted batch's retry
    assert log.append(kv((b"k", b"4"), pid=9, epoch=2, seq=3), leader_epoch=0).first_offset == 4


def test_compressed_batches_stay_compressed_with_their_codec(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=4000)
    codecs = [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
    for round_ in range(3):
        for c in codecs:
            put(log, (b"c%d" % c, b"r%d" % round_), (b"shared", b"%d-%d" % (c, round_)),
                (b"own%d-%d" % (c, round_), b"v" * 50), codec=c)
    log.roll()
    before = state(data_records(log))
    force(log)
    assert state(data_records(log)) == before
    seen = set()
    for h, recs in batches(log):
        if recs:
            seen.add(h.compression)
            assert h.compression != 0
            if len(recs) < h.last_offset_delta + 1:
                assert h.records_count == len(recs)  # rewritten: still compressed, gaps inside
    assert seen == set(codecs)


def test_stamping_a_horizon_keeps_codec_and_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0")
    put(log, (b"a", b"1"), (b"b", None), (b"c", b"3"), ts=T0 - 5000, codec=compression.ZSTD)
    log.roll()
    before = [(r.offset, r.timestamp, r.key, r.value) for r in data_records(log)]
    force(log, now=T0, delete_retention_ms=DAY)
    [(h, recs)] = batches(log)
    assert h.compression == compression.ZSTD and h.attributes & DELETE_HORIZON_FLAG
    assert h.base_timestamp == T0 + DAY and h.max_timestamp == T0 - 5000 + 2
    assert [(r.offset, r.timestamp, r.key, r.value) for r in recs] == before


def test_log_append_time_batches_keep_their_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", message_timestamp_type="LogAppendTime")
    put(log, (b"a", b"1"), (b"b", b"1"))
    put(log, (b"a", b"2"))
    log.roll()
    force(log)
    first, _ = batches(log)
    h, recs = first
    assert [(r.offset, r.key) for r in recs] == [(1, b"b")]
    assert recs[0].timestamp == T0 and h.max_timestamp == T0 and h.last_offset_delta == 1


def test_many_updates_of_few_keys_shrink_to_about_the_key_count(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", segment_bytes=4000)
    fill_updates(log, 3000, 5, per_batch=1)
    log.roll()
    before_size, before_segments = log.size_in_bytes, len(log.segments)
    stats = force(log)
    assert stats.bytes_after < stats.bytes_before / 100  # type: ignore[attr-defined]
    assert log.size_in_bytes == stats.bytes_after  # type: ignore[attr-defined]
    assert log.size_in_bytes < before_size / 100
    # the tiny cleaned segments were grouped into one
    assert len(log.segments) == 2 < before_segments
    assert len(data_records(log)) == 5


def test_dirty_ratio_gates_passes(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    log = open_log(d, segment_bytes=1000)
    fill_updates(log, 120, 4)
    log.roll()
    assert clean(log, now_ms=T0).cleaned
    assert (d / CLEANER_CHECKPOINT_FILE).exists()
    # nothing written since: nothing dirty
    s = clean(log, now_ms=T0)
    assert not s.cleaned and s.dirty_ratio == 0.0
    # a little new data next to a large clean part stays below the default ratio of 0.5
    put(log, (key(0), b"new"))
    log.roll()
    s = clean(log, now_ms=T0)
    assert 0 < s.dirty_ratio < 0.5 and not s.cleaned


# --- crash safety of the swap ------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Raised from the fault hook: not an Exception, so nothing on the way catches it."""


def crash(log: PartitionLog) -> None:
    """Drop the log as a killed process would: fds closed, nothing flushed or written."""
    for seg in log.segments:
        seg.release()
    log._closed = True


SWAP_SEGMENT_BYTES = 900


def few_keys(d: Path) -> PartitionLog:
    """Many updates of six keys: everything collapses into one cleaned segment."""
    log = open_log(d, segment_bytes=SWAP_SEGMENT_BYTES)
    fill_updates(log, 200, 6)
    log.roll()
    return log


def halves(d: Path) -> PartitionLog:
    """120 keys, then new values for half of them: several cleaned segments, each replacing a run."""
    log = open_log(d, segment_bytes=SWAP_SEGMENT_BYTES)
    for i in range(120):
        put(log, (key(i), b"first"))
    for i in range(0, 120, 2):
        put(log, (key(i), b"second"))
    log.roll()
    return log


WORKLOADS: dict[str, Callable[[Path], PartitionLog]] = {"few_keys": few_keys, "halves": halves}


def probe_swap(tmp_path: Path, workload: str) -> tuple[list[str], list[int], list[int], dict[bytes | None, bytes]]:
    """(swap steps, segment bases before, after, key -> value) of an uninterrupted pass."""
    log = WORKLOADS[workload](tmp_path / f"probe-{workload}")
    expected = state(data_records(log))
    old_bases = list(log.segment_base_offsets)
    steps: list[str] = []
    force(log, fault=steps.append)
    new_bases = list(log.segment_base_offsets)
    assert new_bases != old_bases and steps[0] == "before-manifest" and len(steps) > 5
    assert state(data_records(log)) == expected
    return steps, old_bases, new_bases, expected


def check_after_crash(d: Path, step: str, old_bases: list[int], new_bases: list[int],
                      expected: dict[bytes | None, bytes]) -> None:
    log = open_log(d, segment_bytes=SWAP_SEGMENT_BYTES)
    log.high_watermark = log.log_end_offset
    # before the manifest exists the pass is rolled back; from then on it is finished
    assert list(log.segment_base_offsets) == (old_bases if step == "before-manifest" else new_bases), step
    assert state(data_records(log)) == expected, step
    assert not segment_swap.staging_dir(d).exists() and not (d / segment_swap.MANIFEST_FILE).exists()
    put(log, (b"after", b"crash"))  # and the log keeps working
    assert state(data_records(log))[b"after"] == b"crash"
    log.close()


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_crash_at_every_step_of_the_swap_leaves_old_or_new_segments(tmp_path: Path, workload: str) -> None:
    steps, old_bases, new_bases, expected = probe_swap(tmp_path, workload)
    for i, step in enumerate(steps):
        d = tmp_path / f"c-{i}"
        log = WORKLOADS[workload](d)

        def hook(name: str, at: str = step) -> None:
            if name == at:
                raise SimulatedCrash(name)

        with pytest.raises(SimulatedCrash):
            force(log, fault=hook)
        crash(log)
        check_after_crash(d, step, old_bases, new_bases, expected)


def test_sigkill_at_steps_of_the_swap(tmp_path: Path) -> None:
    """The same as above with real process death: the cleaner SIGKILLs itself at a step."""
    steps, old_bases, new_bases, expected = probe_swap(tmp_path, "halves")
    chosen = sorted(set(steps[::3]) | {steps[0], steps[1], *steps[-5:]}, key=steps.index)
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = [{str(REPO)!r}, {str(UNIT_DIR)!r}]
        from pathlib import Path
        import test_storage_cleaner as t
        d, at = Path(sys.argv[1]), sys.argv[2]
        log = t.halves(d)
        def hook(name):
            if name == at:
                os.kill(os.getpid(), signal.SIGKILL)
        t.force(log, fault=hook)
    """)
    procs = [(step, tmp_path / f"k-{i}") for i, step in enumerate(chosen)]
    running = [subprocess.Popen([sys.executable, "-c", code, str(d), step], stdout=subprocess.DEVNULL)
               for step, d in procs]
    for proc in running:
        assert proc.wait() == -signal.SIGKILL
    for step, d in procs:
        check_after_crash(d, step, old_bases, new_bases, expected)


def test_io_error_during_swap_leaves_the_log_usable(tmp_path: Path) -> None:
    log = halves(tmp_path / "c-0")
    expected = state(data_records(log))

    def hook(name: str) -> None:
        if name.startswith("move-"):
            raise OSError("disk hiccup")

    force(log, fault=hook)  # the swap was committed, so it is finished in place
    assert state(data_records(log)) == expected
    assert not segment_swap.staging_dir(tmp_path / "c-0").exists()
    log.close()
    log = open_log(tmp_path / "c-0", segment_bytes=SWAP_SEGMENT_BYTES)
    log.high_watermark = log.log_end_offset
    assert state(data_records(log)) == expected


def test_sigkill_at_random_moments_of_a_write_and_clean_loop(tmp_path: Path) -> None:
    """A writer appends updates and cleans after every few appends; it is killed at a random
    moment (a random delay after it starts a pass), several times. Each reopen must hold exactly
    the state of a prefix of the updates, at least as long as the writer had reported done."""
    d = tmp_path / "c-0"
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(REPO)!r}]
        from pathlib import Path
        from protocol.records import build_batch_from_messages
        from storage import LogConfig, PartitionLog
        from storage.cleaner import clean
        log = PartitionLog.open(Path({str(d)!r}), LogConfig(cleanup_policy="compact", segment_bytes=1500,
                                                             index_interval_bytes=100))
        log.high_watermark = log.log_end_offset
        seq = int(sys.argv[1])
        while True:
            for _ in range(5):
                batch = build_batch_from_messages([(b"k%d" % (seq % 9), b"%d" % seq, (), 1000)])
                log.append(batch, leader_epoch=0)
                log.high_watermark = log.log_end_offset
                seq += 1
            log.roll()
            print("cleaning", seq, flush=True)
            clean(log, now_ms=10_000, min_cleanable_ratio=0.0)
    """)
    rng = random.Random(1234)
    done = 0
    for _round in range(6):
        proc = subprocess.Popen([sys.executable, "-c", code, str(done)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        reported = done
        passes = rng.randrange(3, 20)
        try:
            for line in proc.stdout:
                if line.startswith("cleaning"):
                    reported = int(line.split()[1])
                    passes -= 1
                    if passes <= 0:
                        # not synchronisation: a random kill moment, spread over a pass
                        time.sleep(rng.uniform(0, 0.015))
                        break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert reported > done, "writer made no progress"
        log = open_log(d, segment_bytes=1500)
        log.high_watermark = log.log_end_offset
        recs = data_records(log)
        values = {r.key: int(r.value) for r in recs if r.value is not None}
        written = max(values.values()) + 1
        assert written >= reported
        assert values == {b"k%d" % (s % 9): s for s in range(max(0, written - 9), written)}
        offsets = [r.offset for r in recs]
        assert offsets == sorted(set(offsets))
        assert not segment_swap.staging_dir(d).exists()
        done = written
        log.close()
    assert done > 30


def test_clean_without_anything_cleanable_is_a_no_op(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0")
    put(log, (b"a", b"1"), (b"a", b"2"))
    s = force(log)
    assert not s.cleaned and s.segments_before == 0  # type: ignore[attr-defined]
    assert [r.value for r in data_records(log)] == [b"1", b"2"]



def test_compact_delete_policy_compacts_and_applies_retention(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: the cleaner keeps the latest value per key, and retention
    still drops segments older than retention.ms (which a compact-only log never does)."""
    clock = Clock()
    cfg = {"segment_bytes": 1500, "retention_ms": DAY, "index_interval_bytes": 100}
    logs = {p: PartitionLog.open(tmp_path / f"{p.replace(',', '_')}-0", LogConfig(cleanup_policy=p, **cfg),  # type: ignore[arg-type]
                                 now_ms=clock)
            for p in ("compact", "compact,delete", "delete,compact")}
    for log in logs.values():
        fill_updates(log, 120, 5)
        log.roll()
        assert log.config.compacts
        before = data_records(log)
        force(log)
        assert state(data_records(log)) == state(before) and len(data_records(log)) < len(before)
    later = T0 + 2 * DAY  # every record is older than retention.ms now
    for policy, log in logs.items():
        segments = len(log.segments)
        log.apply_retention(later)
        if policy == "compact":
            assert len(log.segments) == segments and not log.config.deletes
        else:
            assert log.config.deletes and len(log.segments) == 1 and log.log_start_offset == log.log_end_offset
        log.close()
    with pytest.raises(ValueError):
        LogConfig(cleanup_policy="compact,compact")
    with pytest.raises(ValueError):
        LogConfig(cleanup_policy="shred")
