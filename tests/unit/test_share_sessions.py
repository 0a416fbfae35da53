"""Share sessions (broker/share/sessions.py): epoch 0 opens, each request the next epoch, -1 closes;
a fetch covers every partition of its session, listed or not."""

from __future__ import annotations

import uuid

from broker.share.sessions import ShareSessions
from protocol.errors import ErrorCode

T = uuid.UUID(int=1)
K = ("g", "m")


def test_a_session_opens_grows_forgets_and_closes() -> None:
    s = ShareSessions()
    assert s.fetch(K, 0, [(T, 0)], []).partitions == ((T, 0),)
    assert s.fetch(K, 1, [(T, 1)], []).partitions == ((T, 0), (T, 1))  # incremental: 0 stays
    assert s.acknowledge(K, 2).error == ErrorCode.NONE  # an acknowledgement takes an epoch too
    assert s.fetch(K, 3, [], [(T, 0)]).partitions == ((T, 1),)
    closed = s.fetch(K, -1, [], [])
    assert closed.closing and closed.partitions == ((T, 1),)
    assert s.fetch(K, 4, [], []).error == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_a_wrong_epoch_or_no_session_is_refused() -> None:
    s = ShareSessions()
    assert s.fetch(K, 1, [], []).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.acknowledge(K, 1).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    s.fetch(K, 0, [(T, 0)], [])
    assert s.fetch(K, 5, [], []).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert s.acknowledge(K, 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert s.fetch(K, 1, [], []).error == ErrorCode.NONE  # the refused requests took no epoch
    assert s.fetch(K, 0, [(T, 2)], []).partitions == ((T, 2),)  # epoch 0 starts over
