"""read_committed filtering on hand-built logs: aborted batches and markers skipped, order kept."""

from __future__ import annotations

from client.isolation import filter_fetched
from client.structs import TopicPartition
from protocol.records import Record, build_batch, build_control_batch

TP = TopicPartition("t", 0)


def data(base: int, values: list[bytes], pid: int = -1, txn: bool = False) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_offset=base,
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=0 if pid >= 0 else -1, transactional=txn, base_timestamp=1000)


def marker(base: int, pid: int, commit: bool) -> bytes:
    return build_control_batch(pid, 0, commit, 0, 1000, base_offset=base)


# offsets: 0-1 plain | 2-3 pid 7 (aborted) | 4-5 pid 8 (committed) | 6 abort(7) | 7 commit(8) |
#          8 pid 7 again (committed) | 9 commit(7) | 10 plain
LOG = b"".join([
    data(0, [b"p0", b"p1"]),
    data(2, [b"a2", b"a3"], pid=7, txn=True),
    data(4, [b"c4", b"c5"], pid=8, txn=True),
    marker(6, 7, commit=False),
    marker(7, 8, commit=True),
    data(8, [b"c8"], pid=7, txn=True),
    marker(9, 7, commit=True),
    data(10, [b"p10"]),
])
ABORTED = [(7, 2)]


def values(recs: list) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in recs]


def test_read_committed_skips_aborted_batches_and_markers_in_order() -> None:
    recs, nxt = filter_fetched(TP, LOG, 0, ABORTED, read_committed=True)
    assert values(recs) == [(0, b"p0"), (1, b"p1"), (4, b"c4"), (5, b"c5"), (8, b"c8"), (10, b"p10")]
    assert nxt == 11


def test_read_uncommitted_returns_aborted_data_but_no_markers() -> None:
    recs, nxt = filter_fetched(TP, LOG, 0, ABORTED, read_committed=False)
    assert [o for o, _ in values(recs)] == [0, 1, 2, 3, 4, 5, 8, 10]
    assert nxt == 11


def test_aborted_producer_is_judged_again_after_its_abort_marker() -> None:
    # without the abort marker clearing pid 7, its later committed batch at 8 would be lost
    recs, _ = filter_fetched(TP, LOG, 0, ABORTED, read_committed=True)
    assert (8, b"c8") in values(recs)


def test_fetch_offset_inside_a_batch_drops_earlier_records() -> None:
    recs, nxt = filter_fetched(TP, LOG, 5, ABORTED, read_committed=True)
    assert values(recs) == [(5, b"c5"), (8, b"c8"), (10, b"p10")]
    assert nxt == 11


def test_only_markers_and_aborted_data_still_advance_the_position() -> None:
    log = data(2, [b"a2", b"a3"], pid=7, txn=True) + marker(4, 7, commit=False)
    recs, nxt = filter_fetched(TP, log, 2, [(7, 2)], read_committed=True)
    assert recs == [] and nxt == 5


def test_aborted_transaction_starting_in_a_later_fetch_is_not_applied_early() -> None:
    # pid 7's first transaction (offset 0) committed; its aborted one starts at 3
    log = (data(0, [b"c0"], pid=7, txn=True) + marker(1, 7, commit=True) + data(2, [b"x2"])
           + data(3, [b"a3"], pid=7, txn=True) + marker(4, 7, commit=False))
    recs, nxt = filter_fetched(TP, log, 0, [(7, 3)], read_committed=True)
    assert values(recs) == [(0, b"c0"), (2, b"x2")]
    assert nxt == 5


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    whole = data(0, [b"x"])
    partial = data(1, [b"y" * 100])[:40]
    recs, nxt = filter_fetched(TP, whole + partial, 0, [], read_committed=True)
    assert values(recs) == [(0, b"x")] and nxt == 1
    assert filter_fetched(TP, partial, 1, [], read_committed=True) == ([], None)
