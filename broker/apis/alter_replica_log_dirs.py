"""AlterReplicaLogDirs (34): move replicas of this broker to other log directories (Kafka's
ReplicaManager.alterReplicaLogDirs; the move itself is broker/partition/move.py).

Answered at once, per partition, as Kafka answers: NONE once the move has started (it finishes in
the background; DescribeLogDirs shows the future replica and its lag meanwhile), or why not
(TopicTable.alter_log_dir). A partition named for two directories keeps the last.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

from ..context import BrokerContext, ClientInfo

KEY = 34
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for i in t.partitions:
                wanted[(t.name, i)] = d.path
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for (topic, index), path in wanted.items():
        code = ctx.topics.alter_log_dir(topic, index, path)
        results.setdefault(topic, []).append(AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps) for t, ps in results.items()])
