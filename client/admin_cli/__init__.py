"""`ketch topic|group|txn|acl|user ...` and `ketch cluster describe|drain`: administration from the command
line, like Kafka's scripts (kafka-topics, kafka-configs, kafka-consumer-groups, kafka-transactions,
kafka-reassign-partitions, kafka-leader-election, kafka-log-dirs, kafka-metadata-quorum).

Every command is a few calls on the client's Admin (client/admin.py), which sends each request to
the broker that can answer it: a partition's leader, a group's or transactional id's coordinator,
the controller, or every broker. So `--bootstrap` may name any broker of a cluster.

`ketch` (broker/cli.py) finds these commands through the `ketch.commands` and
`ketch.cluster_commands` entry points (pyproject.toml), as it finds `ketch produce` and `ketch
consume`: the broker package does not import the client (docs/architecture.md §1).
"""

from __future__ import annotations

from typing import Any

from . import acls, cluster, groups, topics, txns, users
from .support import common_options


def add_parsers(sub: Any) -> None:
    """`ketch topic`, `ketch group`, `ketch txn`, `ketch acl` (the `ketch.commands` entry point)."""
    common = common_options()
    topics.add_parsers(sub, common)
    groups.add_parsers(sub, common)
    txns.add_parsers(sub, common)
    acls.add_parsers(sub, common)
    users.add_parsers(sub, common)


def add_cluster_parsers(csub: Any) -> None:
    """`ketch cluster describe` and `ketch cluster drain` (the `ketch.cluster_commands` entry point:
    `ketch cluster up`, which runs brokers, is the broker's own)."""
    cluster.add_parsers(csub, common_options())
