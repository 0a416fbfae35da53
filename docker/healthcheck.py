"""The container's healthcheck: healthy when the metadata quorum has a leader and this broker is
registered with it and not fenced, i.e. when it can lead and follow partitions. An open port
alone says neither: a broker listens long before it has registered, and goes on listening while
fenced. Asks the broker's own client listener (the first in `listeners`), as `ketch cluster
describe` does; on a secured one it connects as the broker does to other brokers (its truststore,
its certificate, its login `sasl_inter_broker_username`, a super user), so the healthcheck needs
no settings of its own (docs/containers.md, "Secure mode").

Exit 0 healthy, 1 not (Docker's convention); the reason is the one line Docker keeps in
`docker inspect --format '{{json .State.Health}}'`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from broker.config import BrokerConfig, load_config
from broker.security.listeners import plan
from broker.security.tls import client_context
from client import Admin, Security
from client.admin_cli.cluster import cluster_describe

TIMEOUT_S = 8.0  # below the HEALTHCHECK --timeout, so a hung broker gets a reason, not a kill


def verdict(described: dict[str, Any], node_id: int) -> str | None:
    """None when healthy, else why not."""
    if described.get("leader", -1) < 0:
        return "the metadata quorum has no leader"
    me = [b for b in described.get("brokers", []) if b.get("node") == node_id]
    if not me:
        return f"broker {node_id} is not registered with the quorum"
    if me[0].get("state") != "alive":
        return f"broker {node_id} is {me[0].get('state')}"
    return None


def own_listener(cfg: BrokerConfig) -> tuple[int, Security | None]:
    """The port of the broker's first client listener, and how to reach it as the broker itself."""
    spec = plan(cfg).clients[0]
    if not spec.secured:
        return spec.port, None
    return spec.port, Security(spec.protocol, sasl_mechanism=cfg.sasl_mechanism_inter_broker_protocol.upper(),
                               sasl_username=cfg.sasl_inter_broker_username,
                               sasl_password=cfg.sasl_inter_broker_password,
                               ssl_context=client_context(cfg) if spec.tls else None)


async def describe(target: str, security: Security | None) -> dict[str, Any]:
    async with Admin(target, security=security) as admin:
        return await cluster_describe(admin)


def main() -> int:
    cfg = load_config()  # the container's KETCH_* settings: its node id, listeners, login
    try:
        port, security = own_listener(cfg)
    except Exception as e:  # settings the broker itself would refuse
        print(f"unhealthy: the settings: {e}")
        return 1
    target = f"127.0.0.1:{port}"
    try:
        described = asyncio.run(asyncio.wait_for(describe(target, security), TIMEOUT_S))
    except Exception as e:  # any failure to get an answer is "unhealthy", with its reason
        print(f"unhealthy: asking {target}: {type(e).__name__}: {e}")
        return 1
    problem = verdict(described, cfg.node_id)
    if problem:
        print(f"unhealthy: {problem}")
        return 1
    print(f"healthy: broker {cfg.node_id} registered and alive, quorum leader {described['leader']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
