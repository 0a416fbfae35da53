"""A broker's first start creates its data and metadata directories: a power cut right after must
not take them (and every log later written in them) away. Found by the simulated disk."""

from __future__ import annotations

from pathlib import Path

from broker.log_dirs import META_PROPERTIES, LogDirs
from tests.helpers.dst.disk import SimFileSystem


def test_directories_created_at_first_start_survive_a_power_loss() -> None:
    fs = SimFileSystem()
    data, meta = "/srv/ketch/data", "/srv/ketch/meta"
    LogDirs([data], meta, 1, "c1", fs).prepare()
    fs.crash_worst()
    durable = fs.snapshot()
    for d in (data, meta):
        assert d in durable, f"{d} was lost to the power cut: {sorted(durable)}"
        assert str(Path(d) / META_PROPERTIES) in durable


def test_a_broker_started_on_a_new_disk_keeps_its_directories_through_a_power_loss() -> None:
    """The whole start, not only LogDirs: the start-up writability check created the metadata
    directory (and its parents) before LogDirs did, without fsyncing them into their parents, so
    LogDirs found them there and fsynced nothing. A power cut then took the whole data directory
    -- the metadata log and the quorum's vote with it (simulation seed 29, --faults strand)."""
    import random

    from tests.helpers.dst.cluster import SimCluster
    from tests.helpers.dst.loop import SimLoop
    from tests.helpers.dst.net import SimNetwork

    loop = SimLoop(random.Random(1))
    SimNetwork(loop)
    cluster = SimCluster(loop, 1, lambda n, clock: SimFileSystem(now_ms=clock.now_ms))
    try:
        cluster.start_all()
        loop.run_until(cluster.all_serving, loop.time() + 30)
        assert cluster.all_serving()
        node = cluster.nodes[1]
        data = str(cluster.data_dir(1))
        cluster.kill(1)
        assert isinstance(node.fs, SimFileSystem)
        node.fs.crash_worst()
        durable = node.fs.snapshot()
        assert data in durable, f"{data} was lost to the power cut: {sorted(durable)}"
        assert str(Path(data) / META_PROPERTIES) in durable
    finally:
        for proc in [n.proc for n in cluster.nodes.values() if n.proc is not None and n.proc.alive]:
            loop.kill(proc)
        loop.close()
