"""Producer ids come in blocks the metadata quorum records: distinct across restarts (graceful or
SIGKILL) and continuing after a producer_ids.json written by an older Ketch."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import BrokerProcess
from helpers.raw import producer_ids as raw_producer_ids


def producer_ids(broker: BrokerProcess, n: int) -> list[int]:
    return raw_producer_ids(broker.port, n)


def test_ids_stay_distinct_across_blocks_and_restarts(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    first = producer_ids(b, 2500)  # three blocks
    assert len(set(first)) == 2500 and first == sorted(first)
    b.restart(kill=True)
    second = producer_ids(b, 10)
    b.restart(kill=False)
    third = producer_ids(b, 10)
    seen = first + second + third
    assert len(set(seen)) == len(seen) and min(second) > max(first) and min(third) > max(second)


def test_a_data_directory_from_before_the_quorum_keeps_its_ids_taken(tmp_path: Path, broker_factory) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "old" / "data"
    data.mkdir(parents=True)
    (data / "producer_ids.json").write_text(json.dumps({"version": 1, "next_block_start": 7000}))
    b = broker_factory(data_dir=data)
    assert min(producer_ids(b, 5)) >= 7000


def test_a_restart_replays_the_snapshot_and_the_tail_only(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """With a snapshot every 5 metadata records, 12 blocks leave a snapshot and a short tail: the
    restarted broker rebuilds its image from them and hands out ids after everything before."""
    from broker.quorum.store import QuorumStore  # noqa: PLC0415

    b = broker_factory(env={"KETCH_METADATA_SNAPSHOT_RECORDS": "5"})
    first = producer_ids(b, 12 * 1000)
    b.stop()
    persisted = QuorumStore(b.data_dir / "__cluster_metadata-0").load()
    assert persisted.snapshot is not None and persisted.snapshot.end_offset >= 10
    assert len(persisted.entries) < 8  # the log holds only what follows the snapshot
    b.start()
    after = producer_ids(b, 3)
    assert min(after) > max(first) and len(set(first + after)) == len(first) + 3
