"""Request handlers, one module per Kafka API (named after it), like franz-go's kfake.

Every handler is `async def handle(ctx, client, header, request) -> response | None` (the
context.Handler type): `ctx` is the narrow BrokerContext, never the server. None means "send
nothing" (Produce with acks=0).
"""

from __future__ import annotations

from ..context import Handler
from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_replica_log_dirs,
    api_versions,
    controller_topics,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    forwarded,
    get_replica_log_info,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    quorum,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)

HANDLERS: dict[int, Handler] = {
    m.KEY: m.handle
    for m in (produce, fetch, list_offsets, metadata, find_coordinator, api_versions, create_topics,
              delete_topics, init_producer_id, describe_configs, create_partitions, alter_configs,
              incremental_alter_configs, describe_cluster, offset_for_leader_epoch, describe_topic_partitions,
              elect_leaders, partition_reassignments,
              # the controller's recovery elections (KIP-966), inter-broker listener only
              get_replica_log_info,
              # logs: record deletion, log directories
              delete_records, describe_log_dirs, alter_replica_log_dirs,
              # consumer groups (broker/group)
              join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch, describe_groups,
              list_groups, delete_groups, offset_delete,
              # transactions (broker/txn)
              add_partitions_to_txn, add_offsets_to_txn, end_txn, write_txn_markers, txn_offset_commit,
              describe_transactions, list_transactions, describe_producers)
}
# Forwarded to the quorum leader's controller listener, as Kafka's brokers forward them.
HANDLERS[55] = forwarded.to_controller(quorum.describe_quorum)
HANDLERS[46] = forwarded.to_controller(partition_reassignments.list_reassignments)

# The controller listener: the metadata quorum's protocol (KRaft), and nothing a client uses.
CONTROLLER_HANDLERS: dict[int, Handler] = {
    1: quorum.metadata_fetch, 18: api_versions.handle, 19: controller_topics.create_topics,
    20: controller_topics.delete_topics, 33: controller_topics.alter_configs, 37: controller_topics.create_partitions,
    43: controller_topics.elect_leaders, 45: partition_reassignments.on_controller,
    46: partition_reassignments.list_reassignments,
    56: controller_topics.alter_partition,
    52: quorum.vote, 53: quorum.begin_quorum_epoch,
    54: quorum.end_quorum_epoch, 55: quorum.describe_quorum, 59: quorum.fetch_snapshot,
    62: quorum.broker_registration, 63: quorum.broker_heartbeat, 67: quorum.allocate_producer_ids,
    73: quorum.assign_replicas_to_dirs,
}
