"""A leader's answers to OffsetForLeaderEpoch, from its log's epoch history plus its current epoch."""

from __future__ import annotations

from pathlib import Path

from broker.partition import AppendOrigin, Partition
from broker.partition.replica_state import Assignment
from protocol.clock import ManualClock
from protocol.records import Record, build_batch
from storage.config import LogConfig

UNDEFINED = (-1, -1)


def _batch(n: int) -> bytes:
    return build_batch(Record(i, 0, None, b"v%d" % i) for i in range(n))


def _lead(p: Partition, epoch: int) -> None:
    p.become_leader(Assignment((1,), frozenset({1}), 1, epoch, 0))


def _open(data: Path) -> Partition:
    p = Partition.open(data, "t", 0, LogConfig(), 1, ManualClock(1_000))
    _lead(p, 0)
    return p


def test_an_empty_log_answers_for_the_epoch_it_is_led_in(tmp_path: Path) -> None:
    p = _open(tmp_path)
    try:
        assert p.leader_epoch == 0 and p._log.leader_epochs == []
        assert p.end_offset_for_epoch(0) == (0, 0)  # Kafka's leader has (0, 0) in its cache already
        assert p.end_offset_for_epoch(1) == UNDEFINED
        assert p.end_offset_for_epoch(-1) == UNDEFINED
        p.append(_batch(3), AppendOrigin.CLIENT)
        assert p.end_offset_for_epoch(0) == (0, 3)
    finally:
        p.close()


def test_a_history_of_several_epochs(tmp_path: Path) -> None:
    p = _open(tmp_path)
    for epoch, n in ((0, 3), (2, 2), (5, 4)):
        _lead(p, epoch)
        p.append(_batch(n), AppendOrigin.CLIENT)
    assert p._log.leader_epochs == [(0, 0), (2, 3), (5, 5)] and p.log_end_offset == 9
    answers = {e: p.end_offset_for_epoch(e) for e in range(-1, 7)}
    assert answers == {-1: UNDEFINED, 0: (0, 3), 1: (0, 3), 2: (2, 5), 3: (2, 5), 4: (2, 5), 5: (5, 9),
                       6: UNDEFINED}
    # a new leader epoch that has written nothing yet starts at the log end
    _lead(p, 7)
    assert [p.end_offset_for_epoch(e) for e in (5, 6, 7, 8)] == [(5, 9), (5, 9), (7, 9), UNDEFINED]
    p.close()

    # the history is on disk
    again = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    _lead(again, 7)
    try:
        assert again.leader_epoch == 7 and again._log.leader_epochs == [(0, 0), (2, 3), (5, 5)]
        assert again.end_offset_for_epoch(3) == (2, 5)
        # records deleted from the start: an epoch below the oldest left ends where the history begins
        again._log.delete_records_before(4)
        assert again._log.leader_epochs == [(2, 4), (5, 5)]
        assert again.end_offset_for_epoch(0) == (0, 4)
        assert again.end_offset_for_epoch(2) == (2, 5)
    finally:
        again.close()


def test_a_follower_ahead_in_an_epoch_the_leader_never_wrote_keeps_what_both_share(tmp_path: Path) -> None:
    """The chaos campaign's seed 20261125: a deposed leader that wrote under epoch 6 fetched from
    the epoch-7 leader, whose log holds nothing of epoch 6 and nothing yet of 7. The leader must
    answer from its history plus the epoch it leads in (epoch 5 ends at its log end), not with
    its log start: a follower told (6, 0) truncated its whole log and fetched it all again."""
    leader = Partition.open(tmp_path / "l", "t", 0, LogConfig(), 1, ManualClock(1_000))
    follower = Partition.open(tmp_path / "f", "t", 0, LogConfig(), 2, ManualClock(1_000))
    try:
        for p in (leader, follower):
            for epoch, n in ((0, 3), (2, 2), (5, 4)):
                _lead(p, epoch)
                p.append(_batch(n), AppendOrigin.CLIENT)
        _lead(follower, 6)
        follower.append(_batch(3), AppendOrigin.CLIENT)  # never replicated
        leader.become_leader(Assignment((1, 2), frozenset({1}), 1, 7, 1))
        follower.become_follower(Assignment((1, 2), frozenset({1}), 1, 7, 1))
        assert follower.log_end_offset == 12 and follower.latest_epoch == 6

        div = leader.diverging(follower.log_end_offset, follower.latest_epoch)
        assert div == (5, 9)
        assert follower.truncate_to_divergence(*div) == 9
        assert leader.diverging(follower.log_end_offset, follower.latest_epoch) is None
    finally:
        leader.close()
        follower.close()


def test_a_leader_leads_at_the_controllers_epoch_and_cuts_records_of_later_epochs(tmp_path: Path) -> None:
    """Issue 23 item 6: become_leader raised the epoch to the log's latest when the controller's
    was lower. Followers fetch with the controller's epoch, so such a leader fenced every one of
    them (FENCED_LEADER_EPOCH) for good, and its appends went under an epoch the controller never
    gave. The controller only ever raises a partition's epoch and a broker writes under an epoch
    only once the controller gave it, so records of a later epoch than the one assigned are a
    history this partition never had (a restored or foreign directory): they are cut off, as a
    follower's would be, and the leader leads at the controller's epoch."""
    p = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    for epoch, n in ((0, 3), (2, 2), (5, 4)):
        _lead(p, epoch)
        p.append(_batch(n), AppendOrigin.CLIENT)
    p.close()
    again = Partition.open(tmp_path, "t", 0, LogConfig(), 1, ManualClock(1_000))
    try:
        _lead(again, 3)
        assert again.leader_epoch == 3 and again.check_epoch(3) == 0
        assert again._log.leader_epochs == [(0, 0), (2, 3)] and again.log_end_offset == 5
        again.append(_batch(1), AppendOrigin.CLIENT)
        assert again._log.leader_epochs == [(0, 0), (2, 3), (3, 5)]
        assert again.end_offset_for_epoch(2) == (2, 5)
    finally:
        again.close()


def test_a_follower_epoch_the_leader_never_had_is_a_divergence(tmp_path: Path) -> None:
    """Issue 23 item 6: a follower whose last epoch is above every epoch the leader knows (a
    history from elsewhere) was told nothing and kept its records. Kafka answers a divergence at
    the leader's end of the largest epoch not above the follower's: the follower cuts back to
    where both histories agree and fetches the rest."""
    leader = Partition.open(tmp_path / "l", "t", 0, LogConfig(), 1, ManualClock(1_000))
    follower = Partition.open(tmp_path / "f", "t", 0, LogConfig(), 2, ManualClock(1_000))
    try:
        for p in (leader, follower):
            _lead(p, 0)
            p.append(_batch(3), AppendOrigin.CLIENT)
        _lead(leader, 2)
        leader.append(_batch(2), AppendOrigin.CLIENT)
        _lead(follower, 6)
        follower.append(_batch(4), AppendOrigin.CLIENT)  # offsets 3-6 under an epoch the leader never had
        a = Assignment((1, 2), frozenset({1}), 1, 2, 1)
        leader.become_leader(a)
        follower.become_follower(a)

        div = leader.diverging(follower.log_end_offset, follower.latest_epoch)
        assert div == (2, 5)
        assert follower.truncate_to_divergence(*div) == 3
        assert leader.diverging(follower.log_end_offset, follower.latest_epoch) is None
    finally:
        leader.close()
        follower.close()
