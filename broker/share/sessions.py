"""Share sessions (KIP-932), sans-IO: which partitions a member's ShareFetch requests cover on this
broker, and the epoch that orders its requests.

Kafka's ShareSessionCache, reduced: a session belongs to (group, member). Epoch 0 opens one (replacing
any earlier session of the member) with the partitions it lists; each later request carries the next
epoch and adds partitions (and forgets some); -1 closes it, after its acknowledgements. A fetch in a
session fetches from every partition of the session, listed in the request or not.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SessionKey = tuple[str, str]  # group id, member id
SharePartitionKey = tuple[uuid.UUID, int]  # topic id, partition


@dataclass(slots=True)
class ShareSession:
    next_epoch: int = 1
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set


@dataclass(frozen=True, slots=True)
class SessionStep:
    """What one request's session says: an error, or the partitions to fetch from — or, when the
    session closes with this request, the partitions whose records the member held (released then)."""

    error: ErrorCode = ErrorCode.NONE
    partitions: tuple[SharePartitionKey, ...] = ()
    closing: bool = False


class ShareSessions:
    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def fetch(self, key: SessionKey, epoch: int, listed: list[SharePartitionKey],
              forgotten: list[SharePartitionKey]) -> SessionStep:
        """A ShareFetch's step: its session's partitions after it, or why it cannot be served."""
        if epoch == INITIAL_EPOCH:
            fresh = self.sessions[key] = ShareSession(1, dict.fromkeys(listed))
            for p in forgotten:
                fresh.partitions.pop(p, None)
            return SessionStep(partitions=tuple(fresh.partitions))
        s = self.sessions.get(key)
        if s is None:
            return SessionStep(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return SessionStep(partitions=tuple(s.partitions), closing=True)
        if epoch != s.next_epoch:
            return SessionStep(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        s.next_epoch = 1 if epoch == 0x7FFFFFFF else epoch + 1
        for p in listed:
            s.partitions.setdefault(p, None)
        for p in forgotten:
            s.partitions.pop(p, None)
        return SessionStep(partitions=tuple(s.partitions))

    def acknowledge(self, key: SessionKey, epoch: int) -> SessionStep:
        """A ShareAcknowledge's step: it needs an open session (epoch 0 cannot acknowledge)."""
        s = self.sessions.get(key)
        if epoch == INITIAL_EPOCH:
            return SessionStep(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        if s is None:
            return SessionStep(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return SessionStep(partitions=tuple(s.partitions), closing=True)
        if epoch != s.next_epoch:
            return SessionStep(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        s.next_epoch = 1 if epoch == 0x7FFFFFFF else epoch + 1
        return SessionStep(partitions=tuple(s.partitions))

    def members_of(self, group: str) -> list[str]:
        return [m for g, m in self.sessions if g == group]
