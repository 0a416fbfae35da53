"""The bundled ShareConsumer (client/share_consumer.py) against a real Ketch broker: two members
share one partition and every record goes to exactly one of them; a RELEASEd record comes back with
delivery count 2, a REJECTed one never; acknowledgements ride on the next ShareFetch; close() closes
the share session (what the member held goes to the other member at once, long before its lock
would run out) and leaves the group."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from helpers import BrokerProcess, unique_topic
from helpers.raw import Raw
from helpers.share import SHARE_ENV

from client import (
    AcknowledgeType,
    Admin,
    KafkaClientError,
    Producer,
    ShareConsumer,
    ShareRecord,
    TopicPartition,
)
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse

LOCK_MS = 60_000  # far longer than any test waits: a record that comes back early was released


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share-client") / "data",
                      env={**SHARE_ENV, "KETCH_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS)})
    b.start()
    yield b
    b.close()


async def setup(bs: str, n: int) -> str:
    topic = unique_topic("share-client")
    async with Admin(bs) as admin:
        await admin.create_topic(topic, 1)
    async with Producer(bs) as p:
        for i in range(n):
            await p.send(topic, b"r%d" % i, partition=0)
        await p.flush()
    return topic


Got = list[tuple[int, ShareRecord]]


async def poll_until(consumers: list[ShareConsumer], done: Callable[[Got], bool], timeout: float,
                     decide: Callable[[ShareRecord], AcknowledgeType] | None = None) -> Got:
    """Each consumer polls in its own task (as each would in its own process) until `done(all
    polled)`; in explicit mode each record is acknowledged as `decide` says."""
    got: Got = []
    finished = asyncio.Event()

    async def loop(i: int, c: ShareConsumer) -> None:
        while not finished.is_set():
            for r in await c.poll(timeout_ms=200):
                got.append((i, r))
                if decide is not None:
                    c.acknowledge(r, decide(r))
            if done(got):
                finished.set()

    tasks = [asyncio.ensure_future(loop(i, c)) for i, c in enumerate(consumers)]
    try:
        await asyncio.wait_for(finished.wait(), timeout)
    except TimeoutError:
        raise AssertionError(f"not done after {timeout}s: polled {[(i, r.offset) for i, r in got]}") from None
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return got


async def quiet(consumers: list[ShareConsumer], seconds: float) -> Got:
    """What the consumers still get for `seconds`: records finished must never come back."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    got: Got = []
    while loop.time() < end:
        for i, c in enumerate(consumers):
            got += [(i, r) for r in await c.poll(timeout_ms=100)]
    return got


async def test_two_members_share_one_partition_each_record_to_exactly_one(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = await setup(bs, 0)  # the records come once both members hold the partition (below)
    group = unique_topic("sg")
    accepted: list[int] = []

    def record(tp: TopicPartition, kinds: dict[int, AcknowledgeType], err: KafkaClientError | None) -> None:
        assert err is None and set(kinds.values()) == {AcknowledgeType.ACCEPT}, (kinds, err)
        accepted.extend(kinds)

    kw = dict(max_poll_records=5, on_acknowledged=record)
    async with ShareConsumer(bs, group, **kw) as a, ShareConsumer(bs, group, **kw) as b:  # type: ignore[arg-type]
        a.subscribe([topic])
        b.subscribe([topic])
        # Written before the second member joined, the records could all be acquired by the first
        # one's fetch, and the test would not show a partition shared.
        assert await poll_until([a, b], lambda _: bool(a.assignment() and b.assignment()), 60) == []
        async with Producer(bs) as p:
            for i in range(60):
                await (await p.send(topic, b"r%d" % i, partition=0))  # one at a time: each fetch gets some
        got = await poll_until([a, b], lambda got: len({r.offset for _, r in got}) >= 60, 60)
        got += await quiet([a, b], 2.0)
        assert a.assignment() == b.assignment() == {TopicPartition(topic, 0)}
        # implicit mode: each poll accepted what the previous one handed out, on the ShareFetch it sent
        assert sorted(accepted) == list(range(60))
    async with ShareConsumer(bs, group) as late:  # everything was accepted: closing released nothing
        late.subscribe([topic])
        got_late = await poll_until([late], lambda got: bool(late.assignment()), 30)
        got_late += await quiet([late], 2.0)
        assert got_late == []
    offsets = Counter(r.offset for _, r in got)
    assert [o for o, n in offsets.items() if n > 1] == [], "a record was delivered twice"
    assert sorted(offsets) == list(range(60))
    assert {r.value for _, r in got} == {b"r%d" % i for i in range(60)}
    assert len({i for i, _ in got}) == 2, "one member took every record: the partition was not shared"
    assert {r.delivery_count for _, r in got} == {1}


async def test_a_released_record_comes_back_counted_twice_and_a_rejected_one_never(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = await setup(bs, 10)
    acked: list[tuple[int, AcknowledgeType, KafkaClientError | None]] = []
    async with ShareConsumer(bs, unique_topic("sg"), acknowledgement_mode="explicit",
                             on_acknowledged=lambda tp, kinds, err: acked.extend(
                                 (o, k, err) for o, k in kinds.items())) as c:
        c.subscribe([topic])

        def decide(r: ShareRecord) -> AcknowledgeType:
            return {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.REJECT}.get(r.offset, AcknowledgeType.ACCEPT)

        first = await poll_until([c], lambda got: len(got) >= 10, 30, decide)
        assert sorted(r.offset for _, r in first) == list(range(10))
        assert await c.commit() == {TopicPartition(topic, 0): None}  # ShareAcknowledge, answered
        assert sorted(acked) == [(o, decide(r), None) for o, r in sorted((r.offset, r) for _, r in first)]
        again = await poll_until([c], lambda got: bool(got), 30, lambda r: AcknowledgeType.ACCEPT)
        assert [(r.offset, r.delivery_count, r.value) for _, r in again] == [(3, 2, b"r3")]
        # the ACCEPT of offset 3 goes with the next ShareFetch, not with a commit
        rest = await quiet([c], 2.0)
        assert rest == [], "a rejected or accepted record came back"
        assert (3, AcknowledgeType.ACCEPT, None) in acked


async def test_close_releases_what_the_member_held_and_leaves_the_group(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = await setup(bs, 5)
    group = unique_topic("sg")
    holder = ShareConsumer(bs, group, acknowledgement_mode="explicit", max_poll_records=5)
    await holder.start()
    holder.subscribe([topic])
    held = await poll_until([holder], lambda got: bool(got), 30)  # acquired, never acknowledged
    await holder.close()
    assert describe(broker, group).members == [], "the closed member is still in the group"
    async with ShareConsumer(bs, group) as other:
        other.subscribe([topic])
        # well within the 60 s lock: the closed session gave the records back
        again = await poll_until([other], lambda got: {r.offset for _, r in held} <= {r.offset for _, r in got}, 20)
    counts = {r.offset: r.delivery_count for _, r in again}
    assert all(counts[r.offset] == 2 for _, r in held)


async def test_a_cancelled_poll_loses_no_acknowledgement_and_no_record(broker: BrokerProcess) -> None:
    """A poll cancelled while its ShareFetch (carrying acknowledgements, long-polling for more) is
    out, as `asyncio.wait_for(c.poll(...))` does: the request runs to its end, its acknowledgements
    are reported, and what it acquired is handed out by the next poll."""
    bs = broker.bootstrap
    topic = await setup(bs, 5)
    reported: list[tuple[int, AcknowledgeType, KafkaClientError | None]] = []
    async with ShareConsumer(bs, unique_topic("sg"), acknowledgement_mode="explicit", fetch_max_wait_ms=2000,
                             on_acknowledged=lambda tp, kinds, err: reported.extend(
                                 (o, k, err) for o, k in kinds.items())) as c:
        c.subscribe([topic])
        first = await poll_until([c], lambda got: len(got) >= 5, 30, lambda r: AcknowledgeType.ACCEPT)
        with pytest.raises(TimeoutError):  # cancelled mid-ShareFetch (the broker waits up to 2 s for records)
            await asyncio.wait_for(c.poll(timeout_ms=10_000), 0.3)
        async with Producer(bs) as p:  # acquired by the cancelled poll's ShareFetch, or by the next
            await p.send_and_wait(topic, b"late", partition=0)
        later = await poll_until([c], lambda got: bool(got), 30, lambda r: AcknowledgeType.ACCEPT)
        assert [r.value for _, r in later] == [b"late"]
        assert await c.commit() == {TopicPartition(topic, 0): None}
    assert sorted(reported) == [(o, AcknowledgeType.ACCEPT, None) for o in range(6)], (first, reported)


def describe(broker: BrokerProcess, group: str):  # type: ignore[no-untyped-def]
    raw = Raw(broker.port)
    try:
        resp = raw.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1)
    finally:
        raw.close()
    assert isinstance(resp, ShareGroupDescribeResponse)
    return resp.groups[0]
