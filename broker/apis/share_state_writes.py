"""What InitializeShareGroupState (83), WriteShareGroupState (85) and DeleteShareGroupState (86)
share: each partition's state written to the share coordinator, which answers once
`__share_group_state`'s in-sync replicas have it. They differ only in what is written (a fresh
state, the leader's state, a tombstone), so each handler says that and nothing more. Brokers only:
CLUSTER_ACTION."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.share_group_state import PartitionResult, TopicResult

from ..context import BrokerContext, ClientInfo
from ..share.manager import StoredState

ORDERED = False  # as the three APIs that use it (83, 85, 86)


def may_act(ctx: BrokerContext, client: ClientInfo) -> bool:
    return ctx.authorizer.allows(client, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)


async def write_each(ctx: BrokerContext, client: ClientInfo, req: Any,
                     written: Callable[[Any], tuple[int, StoredState | None]]) -> list[TopicResult]:
    """`written(partition)`: (the writer's leader epoch, -1 for none; the state, None to forget it)."""
    coordinator = ctx.share_coordinator if may_act(ctx, client) else None
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if coordinator is None:
                err = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            else:
                leader_epoch, state = written(p)
                err = await coordinator.write((req.group_id, t.topic_id, p.partition), leader_epoch, state)
            parts.append(PartitionResult(partition=p.partition, error_code=err))
        out.append(TopicResult(topic_id=t.topic_id, partitions=parts))
    return out
