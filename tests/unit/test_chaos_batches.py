"""The chaos campaign's read of who wrote each stored batch, from real segment files."""

from __future__ import annotations

from pathlib import Path

from helpers.chaos.batches import batches_op, segment_batches

from protocol.clock import ManualClock
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import PartitionLog


def _batch(n: int, pid: int, epoch: int, seq: int) -> bytes:
    return build_batch((Record(i, 0, None, b"v%d" % i) for i in range(n)), producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq)


def _log(d: Path, batches: list[bytes]) -> None:
    plog = PartitionLog.open(d, LogConfig(segment_bytes=300), now_ms=ManualClock(1_000).now_ms)
    try:
        for b in batches:
            plog.append(b, leader_epoch=0)
    finally:
        plog.close()


def test_producer_batches_across_segments_and_the_fullest_replica(tmp_path: Path) -> None:
    plain = build_batch(Record(i, 0, None, b"x") for i in range(2))  # no producer: not listed
    written = [_batch(3, 7, 0, 0), plain, _batch(2, 7, 0, 3), _batch(4, 7, 1, 0), _batch(1, 9, 0, 0)]
    _log(tmp_path / "a" / "mixed-0", written)
    _log(tmp_path / "b" / "mixed-0", written[:2])  # a replica that has less
    assert len(list((tmp_path / "a" / "mixed-0").glob("*.log"))) > 1  # several segments were read
    want = [[0, 2, 7, 0, 0], [5, 6, 7, 0, 3], [7, 10, 7, 1, 0], [11, 11, 9, 0, 0]]
    assert segment_batches(tmp_path / "a" / "mixed-0") == want
    op = batches_op("mixed", [(2, tmp_path / "b" / "mixed-0"), (1, tmp_path / "a" / "mixed-0")])
    assert op == {"f": "batches", "topic": "mixed", "partitions": {"0": {"node": 1, "batches": want}}}
