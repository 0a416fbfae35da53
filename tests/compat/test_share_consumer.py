"""confluent-kafka's ShareConsumer (librdkafka 2.16.1, KIP-932 share groups) against Ketch.

Several consumers share one partition and every record goes to exactly one of them; accepted and
rejected records never come back; released records come back with a higher delivery count until
`group.share.delivery.count.limit`; a record whose acquisition lock runs out goes to another member.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from helpers import BrokerProcess, unique_topic
from helpers.confluent import create_topic, produce
from helpers.records import Msg
from helpers.share import SHARE_ENV, close_all, poll_until, quiet_rounds, share_consumer

pytestmark = pytest.mark.compat

LOCK_MS = 3000
LIMIT = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("kip932") / "data",
                      env={**SHARE_ENV, "KETCH_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS),
                           "KETCH_GROUP_SHARE_DELIVERY_COUNT_LIMIT": str(LIMIT)})
    b.start()
    yield b
    b.close()


def _records(n: int) -> list[Msg]:
    return [Msg(i, f"k{i}".encode(), f"r{i}".encode()) for i in range(n)]


def test_consumers_sharing_one_partition_each_get_different_records(broker: BrokerProcess) -> None:
    topic, group = unique_topic("share"), f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, _records(60))
    consumers = [share_consumer(broker.bootstrap, group, [topic]) for _ in range(3)]
    try:
        got = poll_until(consumers, lambda i, m: AcknowledgeType.ACCEPT,
                         lambda got: len({m.offset() for _, m in got}) >= 60, 60, "all 60 records")
        got += quiet_rounds(consumers, 2.0)
    finally:
        close_all(consumers)
    offsets = Counter(m.offset() for _, m in got)
    assert not [o for o, n in offsets.items() if n > 1], "a record was delivered twice"
    assert {m.value() for _, m in got} == {f"r{i}".encode() for i in range(60)}
    assert len({i for i, _ in got}) >= 2, "one consumer took every record: the partition was not shared"
    assert {m.delivery_count() for _, m in got} == {1}


def test_released_records_return_until_the_delivery_limit_and_rejected_ones_never(broker: BrokerProcess) -> None:
    topic, group = unique_topic("share"), f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, _records(10))
    c = share_consumer(broker.bootstrap, group, [topic])

    def decide(i: int, m: object) -> AcknowledgeType:
        return AcknowledgeType.REJECT if m.offset() % 2 == 0 else AcknowledgeType.RELEASE  # type: ignore[attr-defined]

    try:
        got = poll_until([c], decide, lambda got: len(got) >= 5 + 5 * LIMIT, 60,
                         f"each even record once and each odd one {LIMIT} times")
        got += quiet_rounds([c], 2.0)
    finally:
        c.close()
    deliveries = Counter(m.offset() for _, m in got)
    assert deliveries == {o: 1 if o % 2 == 0 else LIMIT for o in range(10)}
    counts = {(m.offset(), m.delivery_count()) for _, m in got}
    assert {n for o, n in counts if o == 1} == set(range(1, LIMIT + 1))  # each time one more


def test_a_record_whose_lock_runs_out_goes_to_another_member(broker: BrokerProcess) -> None:
    topic, group = unique_topic("share"), f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, _records(5))
    holder = share_consumer(broker.bootstrap, group, [topic])
    other = share_consumer(broker.bootstrap, group, [topic])
    try:
        held = poll_until([holder], lambda i, m: AcknowledgeType.ACCEPT, lambda got: bool(got), 30, "a first record")
        # the holder never polls again: its acknowledgements are never sent, its lock runs out
        again = poll_until([other], lambda i, m: AcknowledgeType.ACCEPT,
                           lambda got: {m.offset() for _, m in held} <= {m.offset() for _, m in got},
                           LOCK_MS / 1000 + 30, "the held records, from the other member")
    finally:
        close_all([holder, other])
    redelivered = {m.offset(): m.delivery_count() for _, m in again}
    assert all(redelivered[m.offset()] == 2 for _, m in held)


def test_a_sigkill_of_the_broker_loses_no_acknowledgement(tmp_path: Path) -> None:
    """Acknowledgements answered before a SIGKILL hold after the restart: the accepted records never
    come back, the ones in flight come back (delivered a second time), nothing else."""
    with BrokerProcess(tmp_path / "data", env=SHARE_ENV) as b:
        topic, group = unique_topic("share"), f"sg-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic, 1)
        produce(b.bootstrap, topic, _records(20))
        first = share_consumer(b.bootstrap, group, [topic])
        poll_until([first], lambda i, m: AcknowledgeType.ACCEPT if m.offset() < 10 else AcknowledgeType.RELEASE,
                   lambda got: len(got) >= 10, 30, "the first ten records")
        done = first.commit_sync(10)  # the acknowledgements answered: on the share coordinator's log
        assert done and all(e is None for e in done.values()), done
        b.restart(kill=True)
        second = share_consumer(b.bootstrap, group, [topic])
        try:
            got = poll_until([second], lambda i, m: AcknowledgeType.ACCEPT,
                             lambda got: len({m.offset() for _, m in got}) >= 10, 60, "the ten not accepted")
            got += quiet_rounds([second], 2.0)
        finally:
            close_all([second, first])
    assert sorted(m.offset() for _, m in got) == list(range(10, 20))
