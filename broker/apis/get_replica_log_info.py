"""GetReplicaLogInfo (93): how far this broker's replicas go, for the active controller's
recovery elections (broker/controller/recovery.py, KIP-966).

The answer names the broker epoch it was given in: the controller counts it only while that is
the broker's current registration (a process that has restarted since may have lost its log's
tail). Served on the inter-broker listener only: like WriteTxnMarkers, it is a broker's business,
and Kafka requires CLUSTER_ACTION for it.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages.get_replica_log_info import (
    MAX_PARTITIONS,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    PartitionLogInfo,
    TopicPartitionLogInfo,
)

from ..context import BrokerContext, ClientInfo

KEY = 93
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: GetReplicaLogInfoRequest) -> GetReplicaLogInfoResponse:
    epoch = ctx.broker_epoch()
    out: list[TopicPartitionLogInfo] = []
    left = MAX_PARTITIONS
    truncated = False
    for tp in req.topic_partitions or ():
        if left < len(tp.partitions):
            truncated = True
        wanted, left = tp.partitions[:max(left, 0)], left - len(tp.partitions)
        if not wanted:
            continue
        topic = ctx.topics.by_id.get(tp.topic_id)
        infos = []
        for i in wanted:
            if not client.inter_broker:
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif (part := topic.local.get(i)) is None:
                code = ctx.topics.missing(topic.name, i)
            elif part.closed:
                code = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                infos.append(PartitionLogInfo(partition=i, last_written_leader_epoch=part.latest_epoch,
                                              current_leader_epoch=part.leader_epoch,
                                              log_end_offset=part.log_end_offset, error_code=0))
                continue
            infos.append(PartitionLogInfo(partition=i, error_code=code))
        out.append(TopicPartitionLogInfo(topic_id=tp.topic_id, partition_log_info=infos))
    return GetReplicaLogInfoResponse(broker_epoch=-1 if epoch is None else epoch, truncated=truncated,
                                     topic_partition_log_info_list=out)
