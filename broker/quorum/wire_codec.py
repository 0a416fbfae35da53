"""Between the quorum node's messages and Kafka's KRaft wire messages, both ways. Pure functions.

The metadata log is the partition `__cluster_metadata-0` (topic id 0...01, as Kafka's); its
entries travel as record batches, one batch per run of entries of one epoch (the batch's
partition leader epoch), each entry one record whose value is the entry's data. On the wire a
vote names the candidate's log end offset (Kafka's LastOffset), the node the offset of its last
entry; a fetch response does not echo the fetch offset, so the sender adds the one it asked for.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

from protocol.errors import ErrorCode
from protocol.messages import begin_quorum_epoch as bqe
from protocol.messages import end_quorum_epoch as eqe
from protocol.messages import fetch as kfetch
from protocol.messages import fetch_snapshot as ksnap
from protocol.messages import vote as kvote
from protocol.records import Record, build_batch, decode_batches

from .messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Snapshot,
    VoteRequest,
    VoteResponse,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
METADATA_PARTITION = 0
FETCH_MAX_WAIT_MS = 500


class WireFormatError(ValueError):
    """A KRaft request or response that does not name the metadata partition, or is malformed."""


# ---- entries <-> record batches -----------------------------------------------------------------

def entries_to_batches(entries: Iterable[Entry]) -> bytes:
    out = bytearray()
    run: list[Entry] = []
    for e in list(entries) + [None]:  # type: ignore[list-item]
        if run and (e is None or e.epoch != run[0].epoch or e.offset != run[-1].offset + 1):
            base = run[0].offset
            out += build_batch([Record(x.offset - base, 0, None, x.data) for x in run], base_offset=base,
                               partition_leader_epoch=run[0].epoch, base_timestamp=0)
            run = []
        if e is not None:
            run.append(e)
    return bytes(out)


def batches_to_entries(data: bytes | memoryview | None) -> tuple[Entry, ...]:
    if not data:
        return ()
    out: list[Entry] = []
    for h, records in decode_batches(bytes(data), strict=True):
        for r in records:
            out.append(Entry(r.offset, h.partition_leader_epoch, r.value or b""))
    return tuple(out)


# ---- Vote -----------------------------------------------------------------------------------------

def vote_request_to_wire(m: VoteRequest, cluster_id: str, voter: int) -> kvote.VoteRequest:
    return kvote.VoteRequest(cluster_id=cluster_id, voter_id=voter, topics=[kvote.VoteTopicRequest(
        topic_name=METADATA_TOPIC, partitions=[kvote.VotePartitionRequest(
            partition_index=METADATA_PARTITION, candidate_epoch=m.epoch, candidate_id=m.candidate,
            last_offset_epoch=m.last_epoch, last_offset=m.last_offset + 1, pre_vote=m.pre_vote)])])


def _one_partition(topics: list, what: str) -> object:  # type: ignore[type-arg]
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC or len(topics[0].partitions) != 1:
        raise WireFormatError(f"{what} must name exactly {METADATA_TOPIC}-{METADATA_PARTITION}")
    p = topics[0].partitions[0]
    if p.partition_index != METADATA_PARTITION:
        raise WireFormatError(f"{what} names partition {p.partition_index} of {METADATA_TOPIC}")
    return p


def vote_request_from_wire(req: kvote.VoteRequest) -> VoteRequest:
    p = _one_partition(req.topics, "Vote")
    assert isinstance(p, kvote.VotePartitionRequest)
    return VoteRequest(p.candidate_epoch, p.candidate_id, p.last_offset - 1, p.last_offset_epoch, p.pre_vote)


def vote_response_to_wire(m: VoteResponse | None, error: int = 0) -> kvote.VoteResponse:
    part = kvote.VotePartitionResponse(
        partition_index=METADATA_PARTITION, error_code=0 if m is not None else error,
        leader_id=-1 if m is None or m.leader is None else m.leader, leader_epoch=m.epoch if m else -1,
        vote_granted=bool(m and m.granted))
    return kvote.VoteResponse(error_code=error if m is None else 0,
                              topics=[kvote.VoteTopicResponse(topic_name=METADATA_TOPIC, partitions=[part])])


def vote_response_from_wire(resp: kvote.VoteResponse, pre_vote: bool) -> VoteResponse | None:
    if resp.error_code or len(resp.topics) != 1 or len(resp.topics[0].partitions) != 1:
        return None
    p = resp.topics[0].partitions[0]
    if p.error_code:
        return None
    return VoteResponse(p.leader_epoch, p.vote_granted, pre_vote, None if p.leader_id < 0 else p.leader_id)


# ---- BeginQuorumEpoch ------------------------------------------------------------------------------

def begin_epoch_to_wire(m: BeginQuorumEpoch, cluster_id: str, voter: int) -> bqe.BeginQuorumEpochRequest:
    return bqe.BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter, topics=[bqe.BeginQuorumEpochTopicRequest(
        topic_name=METADATA_TOPIC, partitions=[bqe.BeginQuorumEpochPartitionRequest(
            partition_index=METADATA_PARTITION, leader_id=m.leader, leader_epoch=m.epoch)])])


def begin_epoch_from_wire(req: bqe.BeginQuorumEpochRequest) -> BeginQuorumEpoch:
    p = _one_partition(req.topics, "BeginQuorumEpoch")
    assert isinstance(p, bqe.BeginQuorumEpochPartitionRequest)
    return BeginQuorumEpoch(p.leader_epoch, p.leader_id)


# ---- EndQuorumEpoch --------------------------------------------------------------------------------

def end_epoch_to_wire(m: EndQuorumEpoch, cluster_id: str) -> eqe.EndQuorumEpochRequest:
    return eqe.EndQuorumEpochRequest(cluster_id=cluster_id, topics=[eqe.EndQuorumEpochTopicRequest(
        topic_name=METADATA_TOPIC, partitions=[eqe.EndQuorumEpochPartitionRequest(
            partition_index=METADATA_PARTITION, leader_id=m.leader, leader_epoch=m.epoch,
            preferred_successors=list(m.preferred),
            preferred_candidates=[eqe.ReplicaInfo(candidate_id=v) for v in m.preferred])])])


def end_epoch_from_wire(req: eqe.EndQuorumEpochRequest, version: int) -> EndQuorumEpoch:
    p = _one_partition(req.topics, "EndQuorumEpoch")
    assert isinstance(p, eqe.EndQuorumEpochPartitionRequest)
    preferred = p.preferred_successors if version == 0 else [c.candidate_id for c in p.preferred_candidates]
    return EndQuorumEpoch(p.leader_epoch, p.leader_id, tuple(preferred))


# ---- Fetch of the metadata log ---------------------------------------------------------------------

def fetch_request_to_wire(m: FetchRequest, cluster_id: str) -> kfetch.FetchRequest:
    return kfetch.FetchRequest(
        cluster_id=cluster_id, replica_id=m.replica, replica_state=kfetch.ReplicaState(replica_id=m.replica),
        max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=0, max_bytes=8 << 20,
        topics=[kfetch.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[kfetch.FetchPartition(
            partition=METADATA_PARTITION, current_leader_epoch=m.epoch, fetch_offset=m.fetch_offset,
            last_fetched_epoch=m.last_fetched_epoch, partition_max_bytes=8 << 20)])])


def fetch_replica(req: kfetch.FetchRequest, version: int) -> int:
    return req.replica_state.replica_id if version >= 15 else req.replica_id


def fetch_request_from_wire(req: kfetch.FetchRequest, version: int) -> FetchRequest:
    if len(req.topics) != 1 or len(req.topics[0].partitions) != 1:
        raise WireFormatError(f"a metadata fetch names exactly {METADATA_TOPIC}-{METADATA_PARTITION}")
    t = req.topics[0]
    if (t.topic_id if version >= 13 else None) not in (None, METADATA_TOPIC_ID) or (
            version < 13 and t.topic != METADATA_TOPIC) or t.partitions[0].partition != METADATA_PARTITION:
        raise WireFormatError(f"only {METADATA_TOPIC}-{METADATA_PARTITION} is fetched on the controller listener")
    p = t.partitions[0]
    return FetchRequest(p.current_leader_epoch, fetch_replica(req, version), p.fetch_offset, p.last_fetched_epoch)


def fetch_response_to_wire(m: FetchResponse | None, error: int = 0, leader: tuple[int, int] = (-1, -1)
                           ) -> kfetch.FetchResponse:
    if m is None:
        part = kfetch.PartitionData(partition_index=METADATA_PARTITION, error_code=error,
                                    current_leader=kfetch.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]))
    else:
        part = kfetch.PartitionData(
            partition_index=METADATA_PARTITION,
            error_code=ErrorCode.FENCED_LEADER_EPOCH if m.fenced else 0,
            high_watermark=m.high_watermark, records=entries_to_batches(m.entries) or None,
            current_leader=kfetch.LeaderIdAndEpoch(leader_id=-1 if m.leader is None else m.leader,
                                                   leader_epoch=m.epoch))
        if m.diverging_end_offset is not None:
            part = _with(part, diverging_epoch=kfetch.EpochEndOffset(
                epoch=-1 if m.diverging_epoch is None else m.diverging_epoch, end_offset=m.diverging_end_offset))
        if m.snapshot_end_offset is not None:
            part = _with(part, snapshot_id=kfetch.SnapshotId(end_offset=m.snapshot_end_offset, epoch=-1))
    return kfetch.FetchResponse(responses=[kfetch.FetchableTopicResponse(
        topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part])])


def _with(p: kfetch.PartitionData, **kw: object) -> kfetch.PartitionData:
    return dataclasses.replace(p, **kw)  # type: ignore[arg-type]


def fetch_response_from_wire(resp: kfetch.FetchResponse, fetch_offset: int) -> FetchResponse | None:
    if resp.error_code or len(resp.responses) != 1 or len(resp.responses[0].partitions) != 1:
        return None
    p = resp.responses[0].partitions[0]
    leader = p.current_leader.leader_id
    epoch = p.current_leader.leader_epoch
    if p.error_code == ErrorCode.FENCED_LEADER_EPOCH:
        return FetchResponse(epoch, None if leader < 0 else leader, fetch_offset, fenced=True)
    if p.error_code:
        return None
    div = p.diverging_epoch
    diverging = div.end_offset if div.end_offset >= 0 else None
    snap = p.snapshot_id.end_offset if p.snapshot_id.end_offset >= 0 else None
    return FetchResponse(epoch, None if leader < 0 else leader, fetch_offset,
                         entries=batches_to_entries(p.records), high_watermark=p.high_watermark,
                         diverging_epoch=div.epoch if diverging is not None else None,
                         diverging_end_offset=diverging, snapshot_end_offset=snap)


# ---- FetchSnapshot ---------------------------------------------------------------------------------

def fetch_snapshot_request_to_wire(m: FetchSnapshotRequest, cluster_id: str) -> ksnap.FetchSnapshotRequest:
    return ksnap.FetchSnapshotRequest(cluster_id=cluster_id, replica_id=m.replica, topics=[ksnap.TopicSnapshotRequest(
        name=METADATA_TOPIC, partitions=[ksnap.PartitionSnapshotRequest(
            partition=METADATA_PARTITION, current_leader_epoch=m.epoch,
            snapshot_id=ksnap.SnapshotId(end_offset=m.end_offset, epoch=-1), position=0)])])


def fetch_snapshot_request_from_wire(req: ksnap.FetchSnapshotRequest) -> FetchSnapshotRequest:
    if len(req.topics) != 1 or req.topics[0].name != METADATA_TOPIC or len(req.topics[0].partitions) != 1:
        raise WireFormatError(f"FetchSnapshot names exactly {METADATA_TOPIC}-{METADATA_PARTITION}")
    p = req.topics[0].partitions[0]
    if p.partition != METADATA_PARTITION:
        raise WireFormatError(f"FetchSnapshot names partition {p.partition}")
    return FetchSnapshotRequest(p.current_leader_epoch, req.replica_id, p.snapshot_id.end_offset)


def fetch_snapshot_response_to_wire(m: FetchSnapshotResponse | None, error: int = 0) -> ksnap.FetchSnapshotResponse:
    snap = m.snapshot if m is not None else None
    part = ksnap.PartitionSnapshotResponse(
        index=METADATA_PARTITION,
        error_code=error if m is None else (0 if snap is not None else ErrorCode.SNAPSHOT_NOT_FOUND),
        snapshot_id=ksnap.SnapshotId(end_offset=snap.end_offset if snap else -1, epoch=snap.epoch if snap else -1),
        current_leader=ksnap.LeaderIdAndEpoch(leader_id=-1 if m is None or m.leader is None else m.leader,
                                              leader_epoch=m.epoch if m else -1),
        size=len(snap.data) if snap else 0, position=0, unaligned_records=snap.data if snap else None)
    return ksnap.FetchSnapshotResponse(error_code=0, topics=[ksnap.TopicSnapshotResponse(
        name=METADATA_TOPIC, partitions=[part])])


def fetch_snapshot_response_from_wire(resp: ksnap.FetchSnapshotResponse) -> FetchSnapshotResponse | None:
    if resp.error_code or len(resp.topics) != 1 or len(resp.topics[0].partitions) != 1:
        return None
    p = resp.topics[0].partitions[0]
    leader = p.current_leader.leader_id
    snap = None
    if p.error_code == 0 and p.unaligned_records is not None and p.size == len(p.unaligned_records):
        snap = Snapshot(p.snapshot_id.end_offset, p.snapshot_id.epoch, bytes(p.unaligned_records))
    elif p.error_code not in (0, ErrorCode.SNAPSHOT_NOT_FOUND):
        return None
    return FetchSnapshotResponse(p.current_leader.leader_epoch, None if leader < 0 else leader, snap)
