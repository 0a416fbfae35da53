"""The follower's side of a fetch session (KIP-227) with one leader: which partitions the next
fetch lists, which it forgets, and under which session id and epoch.

The fetcher hands over, before every fetch, the whole set of partitions it wants from that leader
with their fetch state. The first fetch on a connection is full and opens a session; after that a
fetch lists only the partitions whose state changed since the last fetch the leader answered (or
that are new), and forgets the ones no longer wanted. So the leader's session is always exactly
the set the fetcher last asked for: a followed partition cannot drop out of it unnoticed. Whatever
leaves that in doubt — a session error from the leader, a lost connection, an answer the fetcher
had to throw away — makes the next fetch full again.

No I/O here: broker/replication/fetcher.py sends the plans and reports the answers.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

from ..fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

Key = TopicPartition


class FetchState(NamedTuple):
    """What a fetch asks of one partition; any change is news for the leader. The topic id is
    how a v13+ leader knows the partition: a topic deleted and created again under the same name
    is another partition to it. A tuple: one is built for every followed partition before every
    fetch and compared with the last, and a frozen dataclass costs several times as much."""

    topic_id: uuid.UUID
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    session_id: int
    epoch: int
    send: dict[Key, FetchState]  # the partitions the request lists
    forget: list[tuple[Key, uuid.UUID]]  # the partitions (by the id the leader has) to drop from the session
    wanted: dict[Key, FetchState]  # the session as it stands once the leader has this request

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FollowerSession:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._session: dict[Key, FetchState] = {}  # what the leader's session holds

    def plan(self, wanted: dict[Key, FetchState]) -> FetchPlan:
        """The next fetch for `wanted`, every partition the fetcher wants from this leader."""
        if self.epoch == INITIAL_EPOCH:
            return FetchPlan(self.session_id, INITIAL_EPOCH, dict(wanted), [], dict(wanted))
        send = {k: st for k, st in wanted.items() if self._session.get(k) != st}
        forget = [(k, st.topic_id) for k, st in self._session.items()
                  if k not in wanted or wanted[k].topic_id != st.topic_id]
        return FetchPlan(self.session_id, self.epoch, send, forget, dict(wanted))

    def on_response(self, plan: FetchPlan, error_code: int, session_id: int) -> None:
        """The leader answered `plan` with this top-level error and session id."""
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._start_over(INVALID_SESSION_ID)
        elif error_code:
            self._start_over(self.session_id)  # close it with the next (full) fetch, open another
        elif session_id == INVALID_SESSION_ID:
            self._start_over(INVALID_SESSION_ID)  # none opened (the leader's cache is full) or closed
        else:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH if plan.full else self.epoch)
            self._session = plan.wanted

    def reset(self, *, new_connection: bool) -> None:
        """Make the next fetch full: on a new connection (the old session went with the old one),
        or after an answer the fetcher could not use (what the leader thinks it told us is
        then in doubt; the full fetch closes the old session)."""
        self._start_over(INVALID_SESSION_ID if new_connection else self.session_id)

    def _start_over(self, close: int) -> None:
        self.session_id = close
        self.epoch = INITIAL_EPOCH
        self._session = {}
