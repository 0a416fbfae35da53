"""read_committed reads gather aborted transactions only up to the end of the data they return,
and the aborted-transaction indexes held in memory are bounded (issue 11, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _batches import idem, make_marker

from broker.partition import Isolation, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.messages.fetch import AbortedTransaction
from storage import LogConfig, PartitionLog, txn_index


def _txn(pid: int, seq: int = 0) -> bytes:
    return idem(seq, 2, pid=pid, transactional=True)


def _build(path: Path, segments: int) -> tuple[list[int], int]:
    """`segments` segments, each: an aborted two-record transaction of its own producer, then
    its abort marker. Returns each segment's first offset and one segment's size in bytes."""
    one = len(_txn(1)) + len(make_marker(1, 0, abort=True))
    log = PartitionLog.open(path, LogConfig(segment_bytes=one))
    firsts = []
    for i in range(segments):
        firsts.append(log.append(_txn(100 + i), leader_epoch=0).first_offset)
        log.append(make_marker(100 + i, 0, abort=True), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert len(log.segment_base_offsets) >= segments
    log.close()
    return firsts, one


def _read_all(p: Partition) -> list[AbortedTransaction]:
    """Read as a read_committed consumer does, fetch after fetch; the aborts each fetch listed."""
    out: list[AbortedTransaction] = []
    offset = 0
    while offset < p.last_stable_offset:
        r = p.read(offset, 1 << 20, Isolation.READ_COMMITTED)
        assert r.records and r.aborted is not None
        assert all(a.first_offset < r.next_offset for a in r.aborted)  # only what overlaps this data
        out.extend(a for a in r.aborted if a not in out)
        offset = r.next_offset
    return out


def _open(path: Path) -> Partition:
    p = Partition.open(path, "t", 0, LogConfig(segment_bytes=1 << 20), 1, ManualClock(0))
    p.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0))
    return p


def test_a_read_lists_only_the_aborts_within_the_data_it_returns(tmp_path: Path) -> None:
    firsts, one = _build(tmp_path / "t-0", 6)
    p = _open(tmp_path)
    r = p.read(0, one, Isolation.READ_COMMITTED)  # the first segment's batches only
    assert r.records and r.next_offset <= firsts[1]
    assert r.aborted == [AbortedTransaction(100, firsts[0])]
    # later segments' .txnindex files were never read for it (the active one is, at open)
    assert [s.txn_index.cached for s in p._log.segments[2:-1]] == [False] * len(p._log.segments[2:-1])
    assert _read_all(p) == [AbortedTransaction(100 + i, f) for i, f in enumerate(firsts)]
    p.close()


def test_the_indexes_kept_in_memory_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_index, "MAX_CACHED_INDEXES", 3)
    firsts, _ = _build(tmp_path / "t-0", 8)
    p = _open(tmp_path)
    expected = [AbortedTransaction(100 + i, f) for i, f in enumerate(firsts)]
    for _ in range(2):  # the second pass reads evicted indexes back from their files
        assert _read_all(p) == expected
        assert sum(s.txn_index.cached for s in p._log.segments) <= 3
    p.close()
