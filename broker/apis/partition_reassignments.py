"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), kafka-reassign-partitions'
APIs. Alter goes to the active controller (here, or forwarded; the controller listener takes it
too) and is answered once the reassignment has started — the new replicas then catch up and join
the ISR, and the controller drops the old ones (broker/controller/reassignment.py). List is forwarded to the quorum
leader (to_controller in broker/apis/__init__.py) and answered from its metadata image: the partitions with replicas being
added or removed."""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages import partition_reassignments as pr
from protocol.topic_partition import TopicPartition

from ..context import BrokerContext, ClientInfo, ControllerContext

KEY = pr.ALTER_KEY
ORDERED = False


def _wanted(req: pr.AlterPartitionReassignmentsRequest) -> list[tuple[str, int, list[int] | None]]:
    return [(t.name, p.partition_index, p.replicas) for t in req.topics for p in t.partitions]


def _response(outcome: dict[TopicPartition, tuple[ErrorCode, str | None]]) -> pr.AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[pr.ReassignablePartitionResponse]] = {}
    for (topic, i), (code, message) in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append(pr.ReassignablePartitionResponse(
            partition_index=i, error_code=code, error_message=message))
    return pr.AlterPartitionReassignmentsResponse(error_code=0, responses=[
        pr.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: pr.AlterPartitionReassignmentsRequest) -> pr.AlterPartitionReassignmentsResponse:
    """Client listener: through the ControllerClient (forwarded when the controller is elsewhere)."""
    if ctx.controller_client is None:
        return pr.AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        return _response(await ctx.controller_client.reassign(_wanted(req)))
    except KafkaError as e:
        return pr.AlterPartitionReassignmentsResponse(error_code=e.code, error_message=e.message)


async def on_controller(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                        req: pr.AlterPartitionReassignmentsRequest) -> pr.AlterPartitionReassignmentsResponse:
    """Controller listener: decided here, never forwarded again."""
    try:
        return _response(await ctx.shell.reassign(_wanted(req)))
    except KafkaError as e:
        return pr.AlterPartitionReassignmentsResponse(error_code=e.code, error_message=e.message)


async def list_reassignments(ctx: BrokerContext | ControllerContext, client: ClientInfo, header: RequestHeader,
                             req: pr.ListPartitionReassignmentsRequest) -> pr.ListPartitionReassignmentsResponse:
    image = ctx.topics.image
    wanted = None if req.topics is None else {(t.name, i) for t in req.topics for i in t.partition_indexes}
    out = []
    for t in sorted(image.topics.values(), key=lambda t: t.name):
        parts = [pr.OngoingPartitionReassignment(partition_index=i, replicas=list(p.replicas),
                                                 adding_replicas=list(p.adding), removing_replicas=list(p.removing))
                 for i, p in enumerate(t.partitions) if (p.adding or p.removing)
                 and (wanted is None or (t.name, i) in wanted)]
        if parts:
            out.append(pr.OngoingTopicReassignment(name=t.name, partitions=parts))
    return pr.ListPartitionReassignmentsResponse(error_code=0, topics=out)
