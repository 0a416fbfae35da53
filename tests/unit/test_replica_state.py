"""The leader's replication rules, driven without sockets or clocks (broker/partition/replica_state.py)."""

from __future__ import annotations

from broker.partition.replica_state import Assignment, ReplicaState, Role
from protocol.errors import ErrorCode

LAG = 10_000


def leader(isr: frozenset[int] | set[int] = frozenset({1, 2, 3}), replicas: tuple[int, ...] = (1, 2, 3), leo: int = 0,
           hw: int = 0, now: int = 0) -> ReplicaState:
    s = ReplicaState(local_id=1, replica_lag_time_max_ms=LAG)
    s.become_leader(Assignment(replicas, frozenset(isr), 1, 5, 7), leo, hw, now)
    return s


def test_high_watermark_is_the_smallest_isr_log_end() -> None:
    s = leader()
    assert not s.on_local_append(10, now_ms=1)  # followers at -1: nothing committed yet
    assert s.high_watermark == 0
    assert s.on_follower_fetch(2, 10, 10, now_ms=2) is False  # 3 still behind
    assert s.on_follower_fetch(3, 6, 10, now_ms=3)
    assert s.high_watermark == 6
    s.on_follower_fetch(3, 10, 10, now_ms=4)
    assert s.high_watermark == 10


def test_high_watermark_never_goes_back() -> None:
    s = leader(leo=10, hw=8)
    assert s.high_watermark == 8
    s.on_follower_fetch(2, 3, 10, now_ms=1)
    s.on_follower_fetch(3, 3, 10, now_ms=1)
    assert s.high_watermark == 8


def test_single_replica_commits_on_its_own_append() -> None:
    s = leader(isr={1}, replicas=(1,))
    assert s.on_local_append(5, now_ms=0)
    assert s.high_watermark == 5


def test_a_lagging_follower_is_shrunk_out_after_the_lag_time() -> None:
    s = leader(leo=100)
    s.on_follower_fetch(2, 100, 100, now_ms=1)
    s.on_follower_fetch(3, 40, 100, now_ms=1)
    assert s.isr_shrink(100, now_ms=LAG) is None  # within the lag time since becoming leader
    change = s.isr_shrink(100, now_ms=LAG + 5)
    assert change is not None and change.new_isr == {1, 2}
    assert (change.leader_epoch, change.partition_epoch) == (5, 7)
    # until the controller commits it, 3 still counts (a shrink is not assumed)
    assert s.maximal_isr == {1, 2, 3}
    assert s.isr_shrink(100, now_ms=LAG + 6) is None  # one change in flight at a time


def test_a_follower_that_keeps_reaching_the_leaders_previous_end_stays_in_sync() -> None:
    s = leader(leo=0)
    for t in range(1, 30):
        leo = t * 10
        # follower 2 always fetches up to where the leader was at its previous fetch
        s.on_follower_fetch(2, leo - 10, leo, now_ms=t * 1000)
        s.on_follower_fetch(3, leo, leo, now_ms=t * 1000)
    change = s.isr_shrink(290, now_ms=30 * 1000)
    assert change is None


def test_shrink_committed_then_expand_when_caught_up() -> None:
    s = leader(leo=100)
    s.on_follower_fetch(2, 100, 100, now_ms=1)
    change = s.isr_shrink(100, now_ms=LAG + 5)
    assert change is not None
    s.on_isr_change_result(change, ErrorCode.NONE, Assignment((1, 2, 3), change.new_isr, 1, 5, 8))
    assert s.isr == {1, 2} and s.assignment is not None and s.assignment.partition_epoch == 8
    # 3 comes back, below the HW: not yet
    s.on_follower_fetch(3, 50, 100, now_ms=LAG + 10, broker_epoch=6)
    assert s.isr_expansion(100) is None
    s.on_follower_fetch(3, 100, 100, now_ms=LAG + 11, broker_epoch=6)
    grow = s.isr_expansion(100)
    assert grow is not None and grow.new_isr == {1, 2, 3} and grow.partition_epoch == 8
    assert s.maximal_isr == {1, 2, 3}  # an expansion counts at once (KIP-497)


def test_expansion_needs_the_start_of_the_leaders_epoch() -> None:
    s = ReplicaState(local_id=1, replica_lag_time_max_ms=LAG)
    s.become_leader(Assignment((1, 2), frozenset({1}), 1, 5, 7), log_end_offset=50, high_watermark=20, now_ms=0)
    s.on_follower_fetch(2, 30, 50, now_ms=1, broker_epoch=6)  # past the HW but before this epoch began
    assert s.isr_expansion(50) is None
    s.on_follower_fetch(2, 50, 50, now_ms=2, broker_epoch=6)
    assert s.isr_expansion(50) is not None


def test_ineligible_brokers_never_join_and_are_shrunk() -> None:
    s = leader(isr={1, 2}, leo=10)
    s.on_follower_fetch(3, 10, 10, now_ms=1, broker_epoch=6)
    s.set_ineligible({3})
    assert s.isr_expansion(10) is None
    s.set_ineligible({2})
    change = s.isr_shrink(10, now_ms=2)
    assert change is not None and change.new_isr == {1}


def test_a_failed_alter_partition_drops_the_pending_change() -> None:
    s = leader(leo=100)
    change = s.isr_shrink(100, now_ms=LAG + 5)
    assert change is not None
    s.on_isr_change_result(change, ErrorCode.INVALID_UPDATE_VERSION, None)
    assert s.pending is None and s.isr == {1, 2, 3}


def test_acks_all_waits_for_the_isr_and_reports_a_too_small_isr() -> None:
    s = leader(isr={1, 2}, replicas=(1, 2), leo=0)
    assert s.check_min_isr(2) == ErrorCode.NONE
    s.on_local_append(5, now_ms=1)
    assert s.acks_all_outcome(5, 2) is None
    s.on_follower_fetch(2, 5, 5, now_ms=2)
    assert s.acks_all_outcome(5, 2) == ErrorCode.NONE
    small = leader(isr={1}, replicas=(1, 2), leo=0)
    assert small.check_min_isr(2) == ErrorCode.NOT_ENOUGH_REPLICAS
    # a follower outside the ISR that was caught up recently is waited for (it is about to join)
    small.on_follower_fetch(2, 0, 0, now_ms=1)
    small.on_local_append(3, now_ms=1)
    assert small.acks_all_outcome(3, 2) is None
    # once it has lagged past the lag time, the leader alone commits, below min.insync.replicas
    small.on_local_append(3, now_ms=LAG + 2)
    assert small.acks_all_outcome(3, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_replica_never_caught_up_is_not_waited_for_however_young_the_monotonic_clock() -> None:
    """The lag is measured on the monotonic clock, whose origin is arbitrary (seconds after boot on
    a fresh machine): a replica outside the ISR when this broker became leader has never been seen
    caught up, and must not count as caught up "at 0", a moment ago."""
    s = leader(isr={1}, replicas=(1, 2), now=5)
    s.on_local_append(3, now_ms=6)
    assert s.acks_all_outcome(3, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_losing_leadership_fails_waiting_produces() -> None:
    s = leader(leo=5)
    s.become_follower(Assignment((1, 2, 3), frozenset({1, 2, 3}), 2, 6, 8))
    assert s.role == Role.FOLLOWER
    assert s.acks_all_outcome(5, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_high_watermark_is_bounded_by_its_own_log() -> None:
    s = ReplicaState(local_id=2)
    assert s.become_follower(Assignment((1, 2), frozenset({1, 2}), 1, 5, 7))
    assert not s.become_follower(Assignment((1, 2), frozenset({1, 2}), 1, 5, 8))  # same leader+epoch
    s.on_leader_high_watermark(100, local_log_end=40)
    assert s.high_watermark == 40
    s.on_truncate(30)
    assert s.high_watermark == 30


def test_new_leader_epoch_reported_only_when_it_changes() -> None:
    s = ReplicaState(local_id=1)
    a = Assignment((1, 2), frozenset({1, 2}), 1, 5, 7)
    assert s.become_leader(a, 0, 0, 0)
    assert not s.become_leader(Assignment((1, 2, 3), frozenset({1, 2}), 1, 5, 9), 0, 0, 0)
    assert set(s.followers) == {2, 3}
    assert s.become_leader(Assignment((1, 2, 3), frozenset({1, 2}), 1, 6, 10), 0, 0, 0)


def test_the_low_watermark_is_the_smallest_log_start_of_the_live_replicas() -> None:
    """What DeleteRecords waits for (Kafka's lowWatermarkIfLeader): a follower that has not yet
    fetched counts as -1; one on a fenced or stopping broker does not count."""
    s = leader(leo=10, hw=10)
    assert s.low_watermark(4) == -1
    s.on_follower_fetch(2, 10, 10, now_ms=1, log_start_offset=4)
    s.on_follower_fetch(3, 10, 10, now_ms=1, log_start_offset=2)
    assert s.low_watermark(4) == 2
    s.on_follower_fetch(3, 10, 10, now_ms=2, log_start_offset=6)
    assert s.low_watermark(4) == 4 and s.low_watermark(7) == 4
    s.set_ineligible({2})
    assert s.low_watermark(7) == 6


def test_a_late_answer_leaves_a_newer_change_in_flight() -> None:
    """Issue 23 item 6: a shrink is sent; the image brings a new partition epoch (which drops the
    pending change); an expansion is sent; the shrink's answer arrives. It cleared the expansion,
    so the follower being added no longer counted for the high watermark (KIP-497's maximal ISR)
    and a second change could be sent while the expansion was still in flight."""
    s = leader(isr={1, 2, 3}, leo=100)
    s.on_follower_fetch(2, 100, 100, now_ms=1)
    shrink = s.isr_shrink(100, now_ms=LAG + 5)
    assert shrink is not None and shrink.new_isr == {1, 2}
    s.become_leader(Assignment((1, 2, 3), frozenset({1, 2}), 1, 5, 8), 100, 100, now_ms=LAG + 6)
    s.on_follower_fetch(3, 100, 100, now_ms=LAG + 7, broker_epoch=6)
    grow = s.isr_expansion(100)
    assert grow is not None and grow.new_isr == {1, 2, 3} and s.maximal_isr == {1, 2, 3}
    s.on_isr_change_result(shrink, ErrorCode.INVALID_UPDATE_VERSION, None)
    assert s.pending is not None and s.pending.change is grow and s.maximal_isr == {1, 2, 3}
    assert s.isr_expansion(100) is None and s.isr_shrink(100, now_ms=3 * LAG) is None
    s.on_isr_change_result(grow, ErrorCode.NONE, Assignment((1, 2, 3), frozenset({1, 2, 3}), 1, 5, 9))
    assert s.pending is None and s.isr == {1, 2, 3}


def test_an_isr_change_names_each_follower_with_the_broker_epoch_its_fetch_stated() -> None:
    """KIP-903 on the leader's side: the epoch sent for a member is the one its own fetch carried,
    not the metadata's current one — a follower that crashed and registered again must not join
    the ISR on what its previous incarnation fetched (the controller compares the epochs)."""
    s = leader(isr={1, 2}, leo=10, hw=10)
    s.on_follower_fetch(2, 10, 10, now_ms=1, broker_epoch=40)
    s.on_follower_fetch(3, 10, 10, now_ms=1, broker_epoch=17)  # caught up: asks to join
    change = s.isr_expansion(10)
    assert change is not None and change.new_isr == frozenset({1, 2, 3})
    assert s.member_epochs(change.new_isr, own_epoch=99) == [(1, 99), (2, 40), (3, 17)]
    # a fetch that states no epoch -- broker 3 restarted, not yet registered -- while the change
    # waits to be sent: it is still named with the epoch last stated, never -1 (which the
    # controller cannot check), so it is refused once 3 has registered anew
    s.on_follower_fetch(3, 10, 10, now_ms=2)
    assert s.member_epochs(change.new_isr, own_epoch=99)[2] == (3, 17)


def test_a_follower_whose_fetches_state_no_broker_epoch_is_not_asked_into_the_isr() -> None:
    """A broker restarted and not yet registered fetches without a broker epoch; asked into the ISR
    then, it would be named with -1, which the controller cannot check (KIP-903's check is
    skipped), so a request held until that incarnation had lost power and registered again put
    its torn log in the ISR (simulation seed 5430 at 120 s: `__consumer_offsets-1` joined at a log
    end of 822 below the high watermark 835, then led, serving the copier's offsets from before).
    It is asked only once a fetch states its registration."""
    s = leader(isr={1, 2}, leo=10, hw=10)
    s.on_follower_fetch(2, 10, 10, now_ms=1, broker_epoch=40)
    s.on_follower_fetch(3, 10, 10, now_ms=1)  # caught up, but no epoch stated
    assert s.isr_expansion(10) is None
    s.on_follower_fetch(3, 10, 10, now_ms=2, broker_epoch=17)
    change = s.isr_expansion(10)
    assert change is not None and change.new_isr == frozenset({1, 2, 3})
    assert s.member_epochs(change.new_isr, own_epoch=99) == [(1, 99), (2, 40), (3, 17)]


def _copy(s: ReplicaState) -> ReplicaState:
    import copy
    return copy.deepcopy(s)


def test_a_repeated_fetch_takes_the_short_path_only_where_it_agrees_with_the_full_one() -> None:
    """on_repeated_fetch (a follower session's fetch naming a partition where nothing moved) must
    leave the state exactly as on_follower_fetch would, and decline every fetch that may move
    something: a new offset, log start or broker epoch, a follower out of the ISR, or a high
    watermark below the log end (which a joining follower's lag running out can release)."""
    s = leader(leo=10)
    s.on_follower_fetch(2, 10, 10, now_ms=1, log_start_offset=0, broker_epoch=4)
    s.on_follower_fetch(3, 10, 10, now_ms=1, log_start_offset=0, broker_epoch=4)
    assert s.high_watermark == 10
    short, full = _copy(s), _copy(s)
    assert short.on_repeated_fetch(2, 10, 10, 50, 0, 4)
    assert not full.on_follower_fetch(2, 10, 10, now_ms=50, log_start_offset=0, broker_epoch=4)
    assert short.followers[2] == full.followers[2]
    assert short.high_watermark == full.high_watermark == 10
    assert full.isr_expansion(10) is None
    for args in [(2, 9, 10, 60, 0, 4),  # the follower went back (truncated)
                 (2, 10, 12, 60, 0, 4),  # the leader appended since: the fetch moves the HW
                 (2, 10, 10, 60, 3, 4),  # its log start moved: the low watermark may
                 (2, 10, 10, 60, 0, 5),  # a new registration of its broker
                 (4, 10, 10, 60, 0, 4)]:  # not a replica
        assert not _copy(s).on_repeated_fetch(*args), args
    out = leader(isr={1, 2}, leo=10)
    out.on_follower_fetch(2, 10, 10, now_ms=1, log_start_offset=0)
    out.on_follower_fetch(3, 10, 10, now_ms=1, log_start_offset=0)
    assert not out.on_repeated_fetch(3, 10, 10, 5, 0, -1)  # out of the ISR: its fetch may bring it in
    behind = leader(leo=10)
    behind.on_follower_fetch(2, 10, 10, now_ms=1, log_start_offset=0)
    behind.on_follower_fetch(3, 4, 10, now_ms=1, log_start_offset=0)
    assert behind.high_watermark == 4
    assert not behind.on_repeated_fetch(2, 10, 10, 5, 0, -1)  # the HW is below the log end
