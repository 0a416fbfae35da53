"""KIP-966's rule on the leader (broker/partition/replica_state.py): the high watermark does not
advance while the ISR is below min.insync.replicas, so every replica that was in the ISR when it
fell below — the controller's eligible leader replicas — holds everything up to it, and electing one
loses nothing a consumer saw."""

from __future__ import annotations

from broker.partition.replica_state import Assignment, ReplicaState


def test_the_high_watermark_waits_while_the_isr_is_below_min_isr() -> None:
    s = ReplicaState(local_id=1, replica_lag_time_max_ms=10_000, min_isr=2)
    s.become_leader(Assignment((1, 2), frozenset({1, 2}), 1, 5, 7), 0, 0, 0)
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    assert s.high_watermark == 10
    s.become_leader(Assignment((1, 2), frozenset({1}), 1, 5, 8), 10, 10, 2)  # 2 left the ISR
    assert not s.on_local_append(20, now_ms=3)  # acks=1 records: kept, not committed
    assert not s.on_follower_fetch(2, 20, 20, now_ms=4)  # even once 2 has them: it is out of the ISR
    assert s.high_watermark == 10
    s.min_isr = 1  # the topic's min.insync.replicas lowered
    assert s.on_follower_fetch(2, 20, 20, now_ms=5) and s.high_watermark == 20


def test_a_single_replica_below_min_isr_never_commits() -> None:
    """As in Kafka: a topic whose min.insync.replicas exceeds its replicas takes no acks=all write
    and shows a consumer nothing."""
    s = ReplicaState(local_id=1, min_isr=2)
    s.become_leader(Assignment((1,), frozenset({1}), 1, 0, 0), 0, 0, 0)
    assert not s.on_local_append(5, now_ms=0) and s.high_watermark == 0
