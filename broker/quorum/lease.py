"""When a quorum leader may act as the only controller: its lease, and why it holds.

A controller that acknowledges a broker heartbeat renews that broker's lease on its leaderships
(broker/lifecycle.py), so it must know that no other controller has been elected meanwhile. The
guarantee comes from the voters' side (node.py): a voter that has taken a leader's entries from a
fetch response grants no vote, pre-vote or real, for a fetch timeout after that (its *promise*),
and a voter that restarts grants none for a fetch timeout after it starts.

The leader cannot see when its answers arrive, only when the next fetch does; a fetch from the
offset after one of its own entries proves the voter *received* that entry, and so received it no
earlier than the entry was appended here. So the voter's promise runs at least to "appended +
fetch timeout". The lease holds while a majority (the leader counting itself) made such a promise
that has not run out: any election needs a vote from one of them, and none of them gives one yet.

Counting a fetch's *arrival* instead is not enough: a voter whose answers are lost (a one-way
fault) keeps sending fetches while its own fetch timeout runs out, and then it votes.

An idle leader appends a no-op record every quarter of the window (Kafka's NoOpRecord, KIP-835),
so the voters keep confirming fresh entries and the lease does not lapse for want of traffic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


def lease_holds(now: float, window: float, self_id: int, voters: Collection[int],
                confirmed_at: Mapping[int, float | None]) -> bool:
    """Whether a majority of `voters` promised within `window` before `now` to vote for nobody
    else. `confirmed_at[v]` is when the newest entry of this leader's epoch that voter v has
    confirmed holding was appended here (None: none yet); the leader itself always counts."""
    fresh = {self_id} | {v for v, t in confirmed_at.items() if t is not None and now - t < window}
    return 2 * len(fresh & set(voters)) > len(voters)
