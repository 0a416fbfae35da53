"""A broker's first start creates its data and metadata directories: a power cut right after must
not take them (and every log later written in them) away. Found by the simulated disk."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from broker.config import BrokerConfig
from broker.log_dirs import META_PROPERTIES, LogDirs
from broker.server import BrokerServer
from tests.helpers.dst.clock import SimClock
from tests.helpers.dst.disk import SimFileSystem
from tests.helpers.dst.loop import Process, SimLoop
from tests.helpers.dst.net import SimNetwork


def test_directories_created_at_first_start_survive_a_power_loss() -> None:
    fs = SimFileSystem()
    data, meta = "/srv/ketch/data", "/srv/ketch/meta"
    LogDirs([data], meta, 1, "c1", fs).prepare()
    fs.crash_worst()
    durable = fs.snapshot()
    for d in (data, meta):
        assert d in durable, f"{d} was lost to the power cut: {sorted(durable)}"
        assert str(Path(d) / META_PROPERTIES) in durable


def test_a_broker_started_once_keeps_its_data_directory_through_a_power_loss() -> None:
    """The broker's own start-up creates the directory first (its writability check): that
    creation must be as durable as the log directories' own (seed 229 lost a whole broker's disk)."""
    loop = SimLoop(random.Random(1))
    SimNetwork(loop)
    fs = SimFileSystem()
    cfg = BrokerConfig(node_id=1, listen="10.0.0.1:9092", inter_broker_listen="10.0.0.1:9094",
                       controller_listen="10.0.0.1:9093", data_dir="/srv/ketch/data")
    proc = Process("broker1", "10.0.0.1")
    broker = BrokerServer(cfg, SimClock(loop), fs)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(loop.spawn(proc, broker.start()))
    finally:
        loop.kill(proc)
        broker.loop_watch.stop()
        asyncio.set_event_loop(None)
        loop.close()
    fs.crash_worst()
    assert "/srv/ketch/data/meta.properties" in fs.snapshot(), sorted(fs.snapshot())
