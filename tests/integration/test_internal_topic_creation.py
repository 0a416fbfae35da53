"""The offsets topic created on a group's first need, when the client drops the request that
created it.

librdkafka sends its first FindCoordinator on the bootstrap connection and closes that connection
once it knows the brokers' ids, which cancels the request on the broker. The creation must go on
to the end all the same — until the 50 logs are open on this broker — and the next
FindCoordinator must wait for it: answered at once, it names a coordinator whose partitions are
still opening, and librdkafka's synchronous commit fails on COORDINATOR_LOAD_IN_PROGRESS (a
fresh-clone run of 28f799f failed so in tests/integration/test_cli.py).
"""

from __future__ import annotations

from helpers import BrokerProcess
from helpers.cluster_metadata import metadata
from helpers.confluent import create_topic
from helpers.raw import Raw
from helpers.wait import wait_until

from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)

GROUPS = [f"dropped-{i}" for i in range(200)]  # enough to land in every partition of the 50


def test_a_dropped_first_find_coordinator_leaves_the_next_answer_waiting_for_the_logs(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "committed", 1)
    dropped = Raw(broker.port)
    dropped.send(FindCoordinatorRequest(key=GROUPS[0], key_type=0), 3)
    # drop it once the topic is committed: its request is then waiting for the logs to open
    wait_until(lambda: (m := metadata(broker.port, "__consumer_offsets")) is not None
               and "__consumer_offsets" in m[1], timeout=30, message="__consumer_offsets created")
    dropped.close()

    raw = Raw(broker.port)
    try:
        found = raw.request(FindCoordinatorRequest(key=GROUPS[0], key_type=0), 3)
        assert isinstance(found, FindCoordinatorResponse) and found.error_code == 0, found
        commits = [(OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequestTopic(name="committed", partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata="")])]), 8)
            for g in GROUPS]
        raw.send_pipelined(commits)  # all at once, right after the answer
        codes = []
        for _ in GROUPS:
            _, resp = raw.receive(OffsetCommitRequest, 8)
            assert isinstance(resp, OffsetCommitResponse)
            codes.append(resp.topics[0].partitions[0].error_code)
    finally:
        raw.close()
    assert codes == [0] * len(GROUPS), sorted(set(codes))
