"""The internal topics get their configured replication factor, however many brokers are up at first use.

`__consumer_offsets` and `__transaction_state` are created on the first FindCoordinator that needs
them. Created with the replication factor cut to the brokers alive at that moment, a broker down
then left them on two replicas for good. Kafka refuses instead (COORDINATOR_NOT_AVAILABLE) until
enough brokers are up; so does Ketch. Three real brokers, one stopped at first use.
"""

from __future__ import annotations

from helpers.cluster import Cluster
from helpers.cluster_metadata import agreed, find_coordinator, listed_everywhere, metadata
from helpers.wait import wait_until

from protocol.errors import ErrorCode

INTERNAL = ((0, "a-group", "__consumer_offsets"), (1, "a-transactional-id", "__transaction_state"))


def test_internal_topics_wait_for_enough_brokers_and_get_all_their_replicas(cluster: Cluster) -> None:
    c = cluster
    c[3].stop()
    c.wait_until(lambda: (m := metadata(c.ports[1], None)) is not None and m[0] == (1, 2), timeout=30,
                 message="broker 3 gone from the metadata")
    for key_type, key, topic in INTERNAL:
        for _ in range(3):  # asked again and again: still nothing created
            assert find_coordinator(c.ports[1], key, key_type)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        listed = metadata(c.ports[1], None)
        assert listed is not None and topic not in listed[1], f"{topic} created with 2 brokers up"

    c[3].start()
    listed_everywhere(c)
    for key_type, key, topic in INTERNAL:
        c.wait_until(lambda k=key, t=key_type: find_coordinator(c.ports[1], k, t)[0] == 0, timeout=30,
                     message=f"a coordinator for {key}")
        layout = wait_until(lambda t=topic: agreed(c, t, [1, 2, 3]), timeout=30,
                            message=f"{topic} the same on every broker")
        assert all(sorted(replicas) == [1, 2, 3] for _e, _l, replicas, _i in layout.partitions), layout
