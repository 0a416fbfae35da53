"""Fetch sessions (KIP-227) against a real broker: a full fetch opens one, an incremental fetch
lists only what changed and parks like any fetch until something does, and the session errors
come back as the top-level error (broker/fetch_session.py has the rules one by one)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from helpers import BrokerProcess, wait_until
from helpers.cluster_metadata import create as create_at
from helpers.raw import Raw
from helpers.raw import produce_values as produce

from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


Create = Callable[[str, int], None]


@pytest.fixture
def create(broker: BrokerProcess) -> Create:
    def make(name: str, partitions: int = 1) -> None:
        assert create_at(broker.port, name, partitions, -1) == (0, None)
    return make


def req(session_id: int, epoch: int, topic: str, partitions: dict[int, int], *, wait_ms: int = 0,
        forget: list[int] | None = None, topic_id: uuid.UUID | None = None) -> FetchRequest:
    """A fetch of `topic`'s partitions at the given offsets (none listed: an empty topics list)."""
    topics = [FetchTopic(topic=topic, topic_id=topic_id, partitions=[
        FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1_000_000) for p, o in partitions.items()])]
    return FetchRequest(max_wait_ms=wait_ms, min_bytes=1, max_bytes=50_000_000, session_id=session_id,
                        session_epoch=epoch, topics=topics if partitions else [],
                        forgotten_topics_data=[ForgottenTopic(topic=topic, topic_id=topic_id, partitions=forget)]
                        if forget else [])


def fetch(conn: Raw, r: FetchRequest, version: int = 12) -> FetchResponse:
    resp = conn.request(r, version)
    assert isinstance(resp, FetchResponse)
    return resp


def listed(resp: FetchResponse) -> list[tuple[int, int]]:
    """(partition, high watermark) of every partition the answer lists."""
    return [(p.partition_index, p.high_watermark) for t in resp.responses for p in t.partitions]


def test_an_incremental_fetch_lists_only_the_partition_with_news(conn: Raw, create: Create) -> None:
    create("sess", 3)
    full = fetch(conn, req(0, 0, "sess", {0: 0, 1: 0, 2: 0}))
    assert full.error_code == 0 and full.session_id != 0
    assert listed(full) == [(0, 0), (1, 0), (2, 0)]
    sid = full.session_id
    quiet = fetch(conn, req(sid, 1, "sess", {}, wait_ms=100))  # nothing new: nothing listed
    assert (quiet.error_code, quiet.session_id, listed(quiet)) == (0, sid, [])
    produce(conn, "sess", [b"a", b"b"], partition=1)
    news = fetch(conn, req(sid, 2, "sess", {}))
    assert listed(news) == [(1, 2)] and news.responses[0].partitions[0].records
    # the position moved on in partition 1 only: that is all the next fetch lists, and the
    # leader has nothing new to say about any partition
    assert listed(fetch(conn, req(sid, 3, "sess", {1: 2}, wait_ms=100))) == []
    # partition 0 forgotten: a produce there is no news for this session any more
    produce(conn, "sess", [b"c"], partition=0)
    assert listed(fetch(conn, req(sid, 4, "sess", {}, forget=[0]))) == []


def test_an_incremental_fetch_parks_until_a_produce(broker: BrokerProcess, conn: Raw, create: Create) -> None:
    create("sess-park", 2)
    c = Raw(broker.port)
    result: dict[str, object] = {}
    try:
        sid = fetch(c, req(0, 0, "sess-park", {0: 0, 1: 0})).session_id
        assert sid

        def poll() -> None:
            start = time.monotonic()
            result["resp"] = fetch(c, req(sid, 1, "sess-park", {}, wait_ms=30_000))
            result["elapsed"] = time.monotonic() - start

        t = threading.Thread(target=poll)
        t.start()
        wait_until(lambda: t.is_alive(), timeout=5)
        produce(conn, "sess-park", [b"wake"], partition=1)
        t.join(timeout=40)
        assert not t.is_alive()
    finally:
        c.close()
    resp = result["resp"]
    assert isinstance(resp, FetchResponse) and listed(resp) == [(1, 1)]
    assert float(result["elapsed"]) < 25  # woken by the produce, not by the 30 s max wait  # type: ignore[arg-type]


def test_session_errors_are_top_level(broker: BrokerProcess, conn: Raw, create: Create) -> None:
    create("sess-err", 1)
    sid = fetch(conn, req(0, 0, "sess-err", {0: 0})).session_id
    assert sid
    for r, code in [(req(sid + 1 if sid < 0x7FFFFFFF else 1, 1, "sess-err", {}), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                    (req(sid, 5, "sess-err", {}), ErrorCode.INVALID_FETCH_SESSION_EPOCH)]:
        resp = fetch(conn, r)
        assert (resp.error_code, resp.session_id, resp.responses) == (code, 0, [])
    # another connection cannot use it
    other = Raw(broker.port)
    try:
        assert fetch(other, req(sid, 1, "sess-err", {})).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    finally:
        other.close()
    # none of that moved the epoch; (sid, -1) closes the session and is answered in full
    assert fetch(conn, req(sid, 1, "sess-err", {})).error_code == 0
    closed = fetch(conn, req(sid, -1, "sess-err", {0: 0}))
    assert (closed.error_code, closed.session_id, listed(closed)) == (0, 0, [(0, 0)])
    assert fetch(conn, req(sid, 2, "sess-err", {})).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_sessionless_fetch_opens_none(conn: Raw, create: Create) -> None:
    create("sess-none", 1)
    resp = fetch(conn, req(0, -1, "sess-none", {0: 0}))
    assert (resp.session_id, listed(resp)) == (0, [(0, 0)])


def test_sessions_by_topic_id(conn: Raw, create: Create) -> None:
    create("sess-ids", 1)
    md = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="sess-ids")]), 12)
    assert isinstance(md, MetadataResponse) and md.topics[0].topic_id is not None
    tid = md.topics[0].topic_id
    sid = fetch(conn, req(0, 0, "", {0: 0}, topic_id=tid), 13).session_id
    assert sid
    produce(conn, "sess-ids", [b"x"])
    resp = fetch(conn, req(sid, 1, "", {}, topic_id=tid), 13)
    assert [t.topic_id for t in resp.responses] == [tid] and listed(resp) == [(0, 1)]
    # names where the session used ids
    assert fetch(conn, req(sid, 2, "sess-ids", {}), 12).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
