"""A Ketch cluster whose brokers each live in their own network namespace (helpers.chaos.net).

Every broker listens on its host's address at fixed ports (9092 clients, 9093 controller, 9094
inter-broker): hosts have addresses of their own, so ports never clash and a restarted broker comes
back where its peers and clients expect it. Processes are :class:`helpers.broker.BrokerProcess`, run
through ``ip netns exec`` so SIGKILL/SIGSTOP reach the broker itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ..broker import BrokerProcess
from ..cluster import Cluster
from ..confluent import QUIET
from .net import Net

CLIENT_PORT, CONTROLLER_PORT, INTER_BROKER_PORT = 9092, 9093, 9094


class NetCluster(Cluster):
    """Brokers 1..N of `net`, one per namespace."""

    def __init__(self, base: Path | str, net: Net, *, env: Mapping[str, str] | None = None) -> None:
        self.base = Path(base)
        self.net = net
        self.ports = {n: CLIENT_PORT for n in net.hosts}
        voters = ",".join(f"{n}@{net.ip(n)}:{CONTROLLER_PORT}" for n in net.hosts)
        self.brokers = {}
        for n in net.hosts:
            d = self.base / f"node{n}"
            self.brokers[n] = BrokerProcess(
                d / "data",
                host=net.ip(n),
                port=CLIENT_PORT,
                inter_broker_port=INTER_BROKER_PORT,
                env={"KETCH_NODE_ID": str(n), **(env or {})},
                log_path=d / "broker.log",
                prefix=net.exec_prefix(n),
                extra_args=["--voters", voters],
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def admin(self) -> AdminClient:
        """An admin client on the root namespace's admin link, which no fault touches."""
        return AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})

    def wait_listed(self, timeout: float = 60.0) -> None:
        """Until the cluster's Metadata names every broker (all registered and unfenced)."""
        admin = self.admin()
        want = set(self.brokers)

        def listed() -> bool:
            try:
                return set(admin.list_topics(timeout=2).brokers) == want
            except Exception:  # noqa: BLE001 - not up yet
                return False

        self.wait_until(listed, timeout=timeout, message=f"Metadata lists brokers {sorted(want)}")

    def leader_of(self, topic: str, partition: int) -> int | None:
        try:
            md = self.admin().list_topics(topic, timeout=5)
        except Exception:  # noqa: BLE001 - a fault in progress; the caller picks another target
            return None
        t = md.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader if p is not None and p.leader in self.brokers else None

    def controller(self) -> int | None:
        try:
            c = self.admin().list_topics(timeout=5).controller_id
        except Exception:  # noqa: BLE001
            return None
        return c if c in self.brokers else None

    def partition_dir(self, node: int, topic: str, partition: int) -> Path:
        return self.brokers[node].data_dir / f"{topic}-{partition}"

