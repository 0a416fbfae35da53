"""The KRaft APIs on the controller listener: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch
(54), Fetch (1) of the metadata log, FetchSnapshot (59); and DescribeQuorum (55), which also
answers on the client listener so admin tools can ask. One module for the five because they
are one protocol — the quorum's — and each is a few lines around the shell (broker/quorum/shell.py).

Requests from outside the quorum are refused in Kafka's terms before the node sees them: another
cluster's id is INCONSISTENT_CLUSTER_ID, a sender that is not a voter INCONSISTENT_VOTER_SET, a
request for anything but __cluster_metadata-0 UNKNOWN_TOPIC_OR_PARTITION (INVALID_REQUEST for a
malformed one). Stale epochs are the node's business: it answers with its own epoch and leader.
"""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError
from protocol.headers import RequestHeader
from protocol.messages import allocate_producer_ids as apids
from protocol.messages import assign_replicas_to_dirs as ard
from protocol.messages import begin_quorum_epoch as bqe
from protocol.messages import broker_heartbeat as bhb
from protocol.messages import broker_registration as breg
from protocol.messages import describe_quorum as dq
from protocol.messages import end_quorum_epoch as eqe
from protocol.messages import fetch as kfetch
from protocol.messages import fetch_snapshot as ksnap
from protocol.messages import vote as kvote
from storage.faults import broken

from ..context import BrokerContext, ClientInfo, ControllerContext
from ..quorum import wire_codec as wc
from ..quorum.messages import FetchResponse, FetchSnapshotResponse, VoteResponse

ORDERED = False


def _refusal(ctx: ControllerContext, cluster_id: str | None, sender: int) -> int:
    if cluster_id is not None and cluster_id != ctx.config.cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    if sender not in ctx.quorum.voters:
        return ErrorCode.INCONSISTENT_VOTER_SET
    return 0


async def vote(ctx: ControllerContext, client: ClientInfo, header: RequestHeader, req: kvote.VoteRequest
               ) -> kvote.VoteResponse:
    try:
        msg = wc.vote_request_from_wire(req)
    except wc.WireFormatError:
        return wc.vote_response_to_wire(None, ErrorCode.INVALID_REQUEST)
    error = _refusal(ctx, req.cluster_id, msg.candidate)
    if error:
        return wc.vote_response_to_wire(None, error)
    reply = await ctx.quorum.ask(msg.candidate, msg, VoteResponse)
    return wc.vote_response_to_wire(reply, 0 if reply is not None else ErrorCode.REQUEST_TIMED_OUT)


async def begin_quorum_epoch(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                             req: bqe.BeginQuorumEpochRequest) -> bqe.BeginQuorumEpochResponse:
    try:
        msg = wc.begin_epoch_from_wire(req)
        error = _refusal(ctx, req.cluster_id, msg.leader)
    except wc.WireFormatError:
        error = ErrorCode.INVALID_REQUEST
    if not error:
        ctx.quorum.tell(msg.leader, msg)
    return bqe.BeginQuorumEpochResponse(error_code=error, topics=_quorum_topics(ctx))


async def end_quorum_epoch(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                           req: eqe.EndQuorumEpochRequest) -> eqe.EndQuorumEpochResponse:
    """The leader is shutting down cleanly: the preferred voters start the next election now."""
    try:
        msg = wc.end_epoch_from_wire(req, header.api_version)
        error = _refusal(ctx, req.cluster_id, msg.leader)
    except wc.WireFormatError:
        error = ErrorCode.INVALID_REQUEST
    if not error:
        ctx.quorum.tell(msg.leader, msg)
    return eqe.EndQuorumEpochResponse(error_code=error, topics=_quorum_topics(ctx))


def _quorum_topics(ctx: ControllerContext) -> list[bqe.QuorumTopicResponse]:
    leader, epoch, _, _ = ctx.quorum.status()
    return [bqe.QuorumTopicResponse(topic_name=wc.METADATA_TOPIC, partitions=[bqe.QuorumPartitionResponse(
        partition_index=wc.METADATA_PARTITION, error_code=0, leader_id=leader, leader_epoch=epoch)])]


async def metadata_fetch(ctx: ControllerContext, client: ClientInfo, header: RequestHeader, req: kfetch.FetchRequest
                         ) -> kfetch.FetchResponse:
    try:
        msg = wc.fetch_request_from_wire(req, header.api_version)
    except wc.WireFormatError:
        return kfetch.FetchResponse(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    error = _refusal(ctx, req.cluster_id, msg.replica)
    if error:
        return wc.fetch_response_to_wire(None, error)
    reply = await ctx.quorum.ask(msg.replica, msg, FetchResponse)
    if reply is None:
        leader, epoch, _, _ = ctx.quorum.status()
        return wc.fetch_response_to_wire(None, ErrorCode.REQUEST_TIMED_OUT, (leader, epoch))
    return wc.fetch_response_to_wire(reply)


async def fetch_snapshot(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                         req: ksnap.FetchSnapshotRequest) -> ksnap.FetchSnapshotResponse:
    try:
        msg = wc.fetch_snapshot_request_from_wire(req)
    except wc.WireFormatError:
        return ksnap.FetchSnapshotResponse(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    error = _refusal(ctx, req.cluster_id, msg.replica)
    if error:
        return wc.fetch_snapshot_response_to_wire(None, error)
    reply = await ctx.quorum.ask(msg.replica, msg, FetchSnapshotResponse)
    return wc.fetch_snapshot_response_to_wire(reply, 0 if reply is not None else ErrorCode.REQUEST_TIMED_OUT)


async def describe_quorum(ctx: BrokerContext | ControllerContext, client: ClientInfo, header: RequestHeader,
                          req: dq.DescribeQuorumRequest) -> dq.DescribeQuorumResponse:
    if ctx.quorum is None:
        return dq.DescribeQuorumResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.topic_name != wc.METADATA_TOPIC or p.partition_index != wc.METADATA_PARTITION:
                parts.append(dq.DescribeQuorumPartitionResponse(
                    partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            leader, epoch, hw, voters = ctx.quorum.status()
            if leader != ctx.node_id:
                # only the leader knows how far the others are (Kafka answers NOT_LEADER_OR_FOLLOWER)
                parts.append(dq.DescribeQuorumPartitionResponse(
                    partition_index=p.partition_index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    error_message=f"the quorum leader is node {leader}" if leader >= 0 else "no quorum leader yet",
                    leader_id=leader, leader_epoch=epoch))
                continue
            parts.append(dq.DescribeQuorumPartitionResponse(
                partition_index=p.partition_index, error_code=0, leader_id=leader, leader_epoch=epoch,
                high_watermark=hw, observers=[], current_voters=[dq.ReplicaState(
                    replica_id=v.node_id, log_end_offset=v.log_end_offset, last_fetch_timestamp=v.last_fetch_ms,
                    last_caught_up_timestamp=v.last_fetch_ms) for v in voters]))
        topics.append(dq.DescribeQuorumTopicResponse(topic_name=t.topic_name, partitions=parts))
    nodes = [dq.QuorumNode(node_id=n, listeners=[dq.Listener(name="CONTROLLER", host=h, port=port)])
             for n, (h, port) in sorted(ctx.quorum.voters.items())]
    return dq.DescribeQuorumResponse(error_code=0, topics=topics, nodes=nodes)


async def allocate_producer_ids(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                                req: apids.AllocateProducerIdsRequest) -> apids.AllocateProducerIdsResponse:
    """Only the serving quorum leader decides (NOT_CONTROLLER elsewhere), for a broker in its current
    registration epoch (STALE_BROKER_EPOCH); the block is the broker's once its ProducerIdsRecord
    is committed."""
    quorum, controller = ctx.quorum, ctx.controller
    if not quorum.serving:
        return apids.AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER, producer_id_start=-1)
    try:
        record, start, count = controller.allocate_producer_ids(req.broker_id, req.broker_epoch)
    except KafkaError as e:
        return apids.AllocateProducerIdsResponse(error_code=e.code, producer_id_start=-1)
    if not await quorum.propose(record):
        controller.reset()
        return apids.AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER, producer_id_start=-1)
    return apids.AllocateProducerIdsResponse(error_code=0, producer_id_start=start, producer_id_len=count)


async def broker_registration(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                              req: breg.BrokerRegistrationRequest) -> breg.BrokerRegistrationResponse:
    """Decided one at a time with every other partition-affecting change (ControllerShell): the
    partition changes of a re-registration are computed on the image the entry applies to.
    PreviousBrokerEpoch (v3+; -1 before) says whether the broker's last stop was clean (KIP-966)."""
    shell = ctx.shell
    if not shell.active:
        return breg.BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if req.cluster_id != ctx.config.cluster_id:
        return breg.BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    listeners = [(lst.name, lst.host, lst.port, lst.security_protocol) for lst in req.listeners]
    if broken("registration-serial"):  # issue 23 item 1 taken back: beside the serialized path
        controller = shell.controller
        record, epoch = controller.register_broker(req.broker_id, req.incarnation_id, listeners, req.rack,
                                                   ctx.clock.monotonic_ms(), req.previous_broker_epoch, req.log_dirs)
        if not await shell.quorum.propose(record):
            controller.reset()
            return breg.BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
        return breg.BrokerRegistrationResponse(error_code=0, broker_epoch=epoch)
    try:
        epoch = await shell.register_broker(req.broker_id, req.incarnation_id, listeners, req.rack,
                                            ctx.clock.monotonic_ms(), req.previous_broker_epoch, req.log_dirs)
    except KafkaError as e:
        return breg.BrokerRegistrationResponse(error_code=e.code)
    return breg.BrokerRegistrationResponse(error_code=0, broker_epoch=epoch)


async def broker_heartbeat(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                           req: bhb.BrokerHeartbeatRequest) -> bhb.BrokerHeartbeatResponse:
    """Decided one at a time with the other partition-affecting changes (ControllerShell): an
    unfence, fence, controlled shutdown or failed log directory (OfflineLogDirs, v1) carries the
    leadership changes that follow from it."""
    shell, controller = ctx.shell, ctx.controller
    if not shell.active or not ctx.quorum.leader_confirmed():
        # an acknowledged heartbeat renews the broker's lease on its leaderships (lifecycle.py):
        # only a controller that is certainly still the controller may give one
        return bhb.BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        error, _, caught_up, fenced, may_stop = await shell.answer(lambda: controller.heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence, req.want_shut_down,
            ctx.clock.monotonic_ms(), req.offline_log_dirs))
    except KafkaError as e:
        return bhb.BrokerHeartbeatResponse(error_code=e.code)
    if error:
        return bhb.BrokerHeartbeatResponse(error_code=error)
    return bhb.BrokerHeartbeatResponse(error_code=0, is_caught_up=caught_up, is_fenced=fenced,
                                       should_shut_down=may_stop)


async def assign_replicas_to_dirs(ctx: ControllerContext, client: ClientInfo, header: RequestHeader,
                                  req: ard.AssignReplicasToDirsRequest) -> ard.AssignReplicasToDirsResponse:
    """Which log directory holds each replica of the sending broker (KIP-858), decided one at a
    time with the other partition-affecting changes: an assignment to a directory already
    reported failed moves the replica out of its ISR and leadership in the same entry."""
    shell, controller = ctx.shell, ctx.controller
    if not shell.active:
        return ard.AssignReplicasToDirsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    wanted = [(d.id, t.topic_id, p.partition_index) for d in req.directories for t in d.topics for p in t.partitions]
    try:
        error, _, codes = await shell.answer(lambda: controller.assign_replicas_to_dirs(req.broker_id, req.broker_epoch,
                                                                                       wanted))
    except KafkaError as e:
        return ard.AssignReplicasToDirsResponse(error_code=e.code)
    if error:
        return ard.AssignReplicasToDirsResponse(error_code=error)
    return ard.AssignReplicasToDirsResponse(error_code=0, directories=[ard.DirectoryResult(id=d.id, topics=[
        ard.TopicResult(topic_id=t.topic_id, partitions=[
            ard.PartitionResult(partition_index=p.partition_index, error_code=codes.get((t.topic_id, p.partition_index), 0))
            for p in t.partitions]) for t in d.topics]) for d in req.directories])
