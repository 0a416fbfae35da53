"""The compat suites against a 3-broker cluster too: `make compat-cluster` (KETCH_COMPAT_CLUSTER=1).

In that mode the `broker` and `module_broker` fixtures are three broker processes in one quorum
with default.replication.factor 3 and min.insync.replicas 2, every client bootstrapped from all
three. Tests marked `single_broker` look at one process's files, stop and start it, or speak raw
protocol to one port and expect it to lead everything: they run in the single-broker suite only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.broker import HOST
from helpers.cluster import Cluster
from helpers.cluster_metadata import listed_everywhere, voters_for
from helpers.compat_mode import CLUSTER

CLUSTER_ENV = {"KETCH_DEFAULT_REPLICATION_FACTOR": "3", "KETCH_MIN_INSYNC_REPLICAS": "2",
               "KETCH_REPLICA_LAG_TIME_MAX_MS": "10000"}


class ClusterBroker:
    """What the compat tests use of a broker, answered by a cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.host = HOST
        self.port = cluster.ports[1]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap


def _start(base: Path) -> Cluster:
    voters = voters_for(3)
    c = Cluster(base, 3, env=CLUSTER_ENV, args_for=lambda c, n: ["--voters", voters]).start()
    listed_everywhere(c)
    return c


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In cluster mode the single-broker tests are deselected (they ran in the other mode)."""
    if not CLUSTER:
        return
    out = [i for i in items if i.get_closest_marker("single_broker")]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [i for i in items if not i.get_closest_marker("single_broker")]


if CLUSTER:
    @pytest.fixture
    def broker(tmp_path: Path) -> Iterator[ClusterBroker]:  # type: ignore[no-redef]
        c = _start(tmp_path / "cluster")
        try:
            yield ClusterBroker(c)
        finally:
            c.close()

    @pytest.fixture(scope="module")
    def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterBroker]:  # type: ignore[no-redef]
        c = _start(tmp_path_factory.mktemp("module-cluster"))
        try:
            yield ClusterBroker(c)
        finally:
            c.close()
