"""The transaction log and the markers are on disk before they are acted on (issue 11, item 1).

A power loss keeps only what was fsynced. So the order that matters is: PrepareCommit fsynced
before EndTxn is answered, and every marker fsynced before its WriteTxnMarkers answer (after
which the coordinator writes CompleteCommit). With the default flush policy (nothing forced) the
broker would answer first and flush at the next checkpoint: that is the defect this test catches.

The broker runs in this process so the test can watch its fsyncs against its answers in one
timeline; the clients talk to it over TCP as any client would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port, unique_topic
from helpers.wait import wait_until_async

from broker.apis import HANDLERS
from broker.config import BrokerConfig
from broker.server import BrokerServer
from client import Admin, NewTopic, Producer
from storage.log import DataSync, PartitionLog

END_TXN, WRITE_TXN_MARKERS = 26, 27


@pytest.fixture
def timeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    """("flush", dir name, durable end offset) and ("answer", api key, request) in the order they
    happen. A log becomes durable by a flush (the flush policy) or a sync (group commit)."""
    events: list[tuple[Any, ...]] = []
    flush, end_sync = PartitionLog.flush, PartitionLog.end_sync

    def recording_flush(self: PartitionLog) -> None:
        flush(self)
        events.append(("flush", self.directory.name, self.recovery_point))

    def recording_end_sync(self: PartitionLog, sync: DataSync) -> None:
        end_sync(self, sync)
        events.append(("flush", self.directory.name, self.synced_offset))

    monkeypatch.setattr(PartitionLog, "flush", recording_flush)
    monkeypatch.setattr(PartitionLog, "end_sync", recording_end_sync)
    for key in (END_TXN, WRITE_TXN_MARKERS):
        handler = HANDLERS[key]

        async def recording(ctx: Any, info: Any, header: Any, req: Any, handler: Any = handler,
                            key: int = key) -> Any:
            resp = await handler(ctx, info, header, req)
            events.append(("answer", key, req))
            return resp

        monkeypatch.setitem(HANDLERS, key, recording)
    yield events


def _durable(events: list[tuple[Any, ...]], upto: int, prefix: str) -> dict[str, int]:
    """The durable end offset of each log whose directory starts with `prefix`, as of event `upto`."""
    out: dict[str, int] = {}
    for ev in events[:upto]:
        if ev[0] == "flush" and ev[1].startswith(prefix):
            out[ev[1]] = max(out.get(ev[1], 0), ev[2])
    return out


async def test_prepare_and_markers_are_fsynced_before_they_are_answered(
        tmp_path: Path, timeline: list[tuple[Any, ...]]) -> None:
    port = free_port()
    cfg = BrokerConfig(listen=f"127.0.0.1:{port}", data_dir=str(tmp_path / "data"),
                       inter_broker_listen=f"127.0.0.1:{free_port()}")
    server = BrokerServer(cfg)
    await server.start()
    try:
        bootstrap = f"127.0.0.1:{port}"
        topic = unique_topic("durable")
        async with Admin(bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        async with Producer(bootstrap, transactional_id="durable-order") as producer:
            await producer.init_transactions()
            for _ in range(3):
                await producer.begin_transaction()
                for i in range(4):
                    await producer.send(topic, b"v", partition=i % 2)
                await producer.commit_transaction()
        # The last commit is answered once prepared; its markers follow.
        await wait_until_async(lambda: sum(1 for ev in timeline if ev[:2] == ("answer", WRITE_TXN_MARKERS)) >= 3,
                               10, message="the third transaction's markers")
    finally:
        await server.stop()

    answers = [i for i, ev in enumerate(timeline) if ev[0] == "answer"]
    end_txns = [i for i in answers if timeline[i][1] == END_TXN]
    markers = [i for i in answers if timeline[i][1] == WRITE_TXN_MARKERS]
    assert len(end_txns) == 3 and len(markers) >= 3

    # Each EndTxn answer comes after a flush of the transaction log covering one more
    # PrepareCommit than before (Ongoing, PrepareCommit, CompleteCommit per transaction; the
    # state log of one transactional id is a single partition).
    (tdir,) = {ev[1] for ev in timeline if ev[0] == "flush" and ev[1].startswith("__transaction_state-") and ev[2]}
    durable_at_answer = [_durable(timeline, i, tdir).get(tdir, 0) for i in end_txns]
    assert durable_at_answer == sorted(durable_at_answer) and len(set(durable_at_answer)) == 3
    for n, durable in enumerate(durable_at_answer):
        assert durable >= 3 * n + 2, f"EndTxn {n} answered with the log durable only to {durable}"

    # Each WriteTxnMarkers answer comes after both data partitions were flushed past a marker
    # (one marker per partition per transaction, after the 2 records of that transaction).
    for n, i in enumerate(markers[:3]):
        durable = _durable(timeline, i, f"{topic}-")
        assert sorted(durable) == [f"{topic}-0", f"{topic}-1"], durable
        assert all(end >= 3 * (n + 1) for end in durable.values()), (n, durable)
