"""Every API this broker speaks: api key -> request and response schema classes."""

from __future__ import annotations

from ..schema import Message
from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)

_PAIRS: tuple[tuple[type[Message], type[Message]], ...] = (
    (produce.ProduceRequest, produce.ProduceResponse),
    (fetch.FetchRequest, fetch.FetchResponse),
    (list_offsets.ListOffsetsRequest, list_offsets.ListOffsetsResponse),
    (metadata.MetadataRequest, metadata.MetadataResponse),
    (offset_commit.OffsetCommitRequest, offset_commit.OffsetCommitResponse),
    (offset_fetch.OffsetFetchRequest, offset_fetch.OffsetFetchResponse),
    (find_coordinator.FindCoordinatorRequest, find_coordinator.FindCoordinatorResponse),
    (join_group.JoinGroupRequest, join_group.JoinGroupResponse),
    (heartbeat.HeartbeatRequest, heartbeat.HeartbeatResponse),
    (leave_group.LeaveGroupRequest, leave_group.LeaveGroupResponse),
    (sync_group.SyncGroupRequest, sync_group.SyncGroupResponse),
    (describe_groups.DescribeGroupsRequest, describe_groups.DescribeGroupsResponse),
    (list_groups.ListGroupsRequest, list_groups.ListGroupsResponse),
    (api_versions.ApiVersionsRequest, api_versions.ApiVersionsResponse),
    (create_topics.CreateTopicsRequest, create_topics.CreateTopicsResponse),
    (delete_topics.DeleteTopicsRequest, delete_topics.DeleteTopicsResponse),
    (init_producer_id.InitProducerIdRequest, init_producer_id.InitProducerIdResponse),
    (add_partitions_to_txn.AddPartitionsToTxnRequest, add_partitions_to_txn.AddPartitionsToTxnResponse),
    (add_offsets_to_txn.AddOffsetsToTxnRequest, add_offsets_to_txn.AddOffsetsToTxnResponse),
    (end_txn.EndTxnRequest, end_txn.EndTxnResponse),
    (write_txn_markers.WriteTxnMarkersRequest, write_txn_markers.WriteTxnMarkersResponse),
    (txn_offset_commit.TxnOffsetCommitRequest, txn_offset_commit.TxnOffsetCommitResponse),
    (describe_configs.DescribeConfigsRequest, describe_configs.DescribeConfigsResponse),
    (delete_groups.DeleteGroupsRequest, delete_groups.DeleteGroupsResponse),
    (describe_producers.DescribeProducersRequest, describe_producers.DescribeProducersResponse),
    (describe_transactions.DescribeTransactionsRequest, describe_transactions.DescribeTransactionsResponse),
    (list_transactions.ListTransactionsRequest, list_transactions.ListTransactionsResponse),
)

REQUESTS: dict[int, type[Message]] = {req.API_KEY: req for req, _ in _PAIRS}
RESPONSES: dict[int, type[Message]] = {resp.API_KEY: resp for _, resp in _PAIRS}
