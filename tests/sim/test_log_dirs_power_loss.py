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
