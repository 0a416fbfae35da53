"""A share group (KIP-932) on three brokers survives a SIGKILL of its share coordinator: the broker
leading the group's `__share_group_state` partition. Two bundled ShareConsumers ACCEPT every record;
the share coordinator is killed (the group is chosen so that it leads neither the topic's partition
nor the group); consumption goes on, its acknowledgements now written through the coordinator that
took over. Then the killed broker comes back and the share-partition's leader is killed too, so the
new leader reads the share-partition back from the share coordinator: an acceptance answered before
either kill must hold there. Every record is delivered, each accepted exactly once, and no record
comes back after its acceptance was answered."""

from __future__ import annotations

import asyncio
import uuid

from helpers import Cluster, wait_until
from helpers.cluster_metadata import (
    SHORT_SESSION,
    agreed,
    coordinator,
    listed_everywhere,
    metadata,
    new_topic,
    share_coordinator,
    topic_id,
    voters_for,
)
from helpers.share import SHARE_ENV

from client import AcknowledgeType, KafkaClientError, Producer, ShareConsumer, TopicPartition

PER_PHASE = 60
LOCK_MS = 5000  # an acknowledgement a kill swallowed: its record comes back this soon


def in_sync(c: Cluster, topic: str) -> bool:
    """Every partition of `topic` has all its replicas in sync, as a broker's Metadata says."""
    m = metadata(c.ports[c.running()[0]], topic)
    layout = m[1].get(topic) if m is not None else None
    return layout is not None and all(set(isr) == set(replicas) for _, _, replicas, isr in layout.partitions)


def pick_group(c: Cluster, tid: uuid.UUID, leader: int) -> tuple[str, int, int]:
    """A group whose share coordinator is neither the partition's leader nor the group coordinator:
    (group, share coordinator, group coordinator)."""
    port = c.ports[leader]
    wait_until(lambda: share_coordinator(port, "probe", tid, 0) > 0, timeout=30, message="a share coordinator")
    for i in range(500):
        group = f"share-failover-{i}"
        x, g = share_coordinator(port, group, tid, 0), coordinator(port, group, 0)
        if x > 0 and g > 0 and x not in (leader, g):
            return group, x, g
    raise AssertionError("no group whose share coordinator is apart from the leader and the group coordinator")


async def test_share_group_goes_on_after_its_share_coordinator_is_killed(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env={**SHORT_SESSION, **SHARE_ENV,
                                      "KETCH_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS)})
    listed_everywhere(c)
    topic = "share-failover"
    leader = new_topic(c, topic, 1, 3).partitions[0][1]
    tid = topic_id(c.ports[leader], topic)
    group, x, g = pick_group(c, tid, leader)

    events: list[tuple[str, int, int]] = []  # ("delivered", offset, delivery count) / ("accepted", offset, 0)
    values: dict[int, bytes | None] = {}

    def on_acknowledged(tp: TopicPartition, kinds: dict[int, AcknowledgeType], err: KafkaClientError | None) -> None:
        if err is None:
            events.extend(("accepted", o, 0) for o, k in kinds.items() if k == AcknowledgeType.ACCEPT)

    def accepted() -> set[int]:
        return {o for kind, o, _ in events if kind == "accepted"}

    stop = asyncio.Event()

    async def consume(sc: ShareConsumer) -> None:
        sc.subscribe([topic])
        while not stop.is_set():
            for r in await sc.poll(timeout_ms=200):
                events.append(("delivered", r.offset, r.delivery_count))
                values[r.offset] = r.value
                sc.acknowledge(r, AcknowledgeType.ACCEPT)

    async def produce(first: int) -> None:
        async with Producer(c.bootstrap) as p:
            for i in range(first, first + PER_PHASE):
                await p.send(topic, b"v%d" % i, partition=0)
            await p.flush()

    async def until(cond, timeout: float, message) -> None:  # type: ignore[no-untyped-def]
        await asyncio.to_thread(wait_until, cond, timeout=timeout, message=message)

    consumers = [ShareConsumer(c.bootstrap, group, acknowledgement_mode="explicit", max_poll_records=7,
                               on_acknowledged=on_acknowledged, request_timeout_ms=40_000) for _ in range(2)]
    for sc in consumers:
        await sc.start()
    tasks = [asyncio.ensure_future(consume(sc)) for sc in consumers]
    try:
        await produce(0)
        await until(lambda: accepted() >= set(range(PER_PHASE)), 60,
                    lambda: f"the first {PER_PHASE} accepted (have {len(accepted())})")

        await until(lambda: in_sync(c, topic) and in_sync(c, "__share_group_state"), 30,
                    "every replica in sync (a partition with only its killed leader in sync has no leader)")
        c.kill(x)  # the share coordinator; the partition's leader and the group coordinator stay
        live = next(n for n in c.node_ids if n != x)
        await until(lambda: share_coordinator(c.ports[live], group, tid, 0) not in (x, -1), 30,
                    "the share coordinator to move off the killed broker")
        await produce(PER_PHASE)
        await until(lambda: accepted() >= set(range(2 * PER_PHASE)), 90,
                    lambda: f"{2 * PER_PHASE} accepted after the share coordinator's kill (have {len(accepted())})")

        # the share-partition moves: its new leader has only what the share coordinators wrote
        await asyncio.to_thread(c.restart, x)
        await asyncio.to_thread(listed_everywhere, c)
        await until(lambda: in_sync(c, topic) and in_sync(c, "__share_group_state"), 60,
                    "the restarted broker back in sync")
        c.kill(leader)
        rest = [n for n in c.node_ids if n != leader]
        await until(lambda: (lay := agreed(c, topic, rest)) is not None and lay.partitions[0][1] in rest, 30,
                    "a new leader for the share-partition")
        await produce(2 * PER_PHASE)
        await until(lambda: accepted() >= set(range(3 * PER_PHASE)), 90,
                    lambda: f"{3 * PER_PHASE} accepted after the leader's kill (have {len(accepted())})")
        # an observation window, not a wait for something: locks of records acquired around the
        # kills run out within LOCK_MS, so whatever was not accepted would be delivered again in it
        await asyncio.sleep(LOCK_MS / 1000 + 1)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sc in consumers:
            await sc.close()

    total = 3 * PER_PHASE
    assert values == {i: b"v%d" % i for i in range(total)}, "records missing or wrong"
    done: dict[int, int] = {}  # offset -> index of its acceptance
    for i, (kind, o, _) in enumerate(events):
        if kind == "accepted":
            assert o not in done, f"offset {o} accepted twice"
            done[o] = i
    assert sorted(done) == list(range(total))
    late = [(o, n) for i, (kind, o, n) in enumerate(events) if kind == "delivered" and o in done and i > done[o]]
    assert late == [], f"records delivered again after their acceptance was answered: {late}"
    counts = [n for kind, _, n in events if kind == "delivered"]
    assert min(counts) == 1, counts
    assert g != x, "the group coordinator was killed too"
