"""Dynamic broker configs across three real broker processes: a cluster-wide default set through a
broker that is not the active controller (forwarded to it) reaches every broker's DescribeConfigs,
and the cluster-wide min.insync.replicas the controller wrote is there too (that the running logs
take such a value: tests/integration/test_dynamic_broker_configs.py)."""

from __future__ import annotations

from helpers.cluster import Cluster
from helpers.cluster_metadata import new_topic
from helpers.quorum_views import agreed_leader
from helpers.raw import Raw

from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

TOPIC, BROKER, SET = 2, 4, 0
DYNAMIC_DEFAULT_BROKER = 3


def topic_config(port: int, topic: str, name: str) -> tuple[str | None, int] | None:
    raw = Raw(port)
    try:
        resp = raw.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=TOPIC, resource_name=topic, configuration_keys=[name])]), 4)
    finally:
        raw.close()
    assert isinstance(resp, DescribeConfigsResponse)
    r = resp.results[0]
    return None if r.error_code or not r.configs else (r.configs[0].value, r.configs[0].config_source)


def test_a_cluster_wide_default_set_anywhere_reaches_every_broker(cluster: Cluster) -> None:
    c = cluster
    new_topic(c, "dyn", 1, 3)
    views: list[int] = []
    c.wait_until(lambda: views.append(v.leader) or True if (v := agreed_leader(c, c.running())) else False,
                 timeout=15, message="a quorum leader")
    via = next(n for n in c.node_ids if n != views[-1])
    for n in c.node_ids:
        c.wait_until(lambda n=n: topic_config(c.ports[n], "dyn", "min.insync.replicas") == ("1", DYNAMIC_DEFAULT_BROKER),
                     timeout=15, message=f"the controller's cluster-wide min.insync.replicas on broker {n}")
    raw = Raw(c.ports[via])
    try:
        resp = raw.request(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=BROKER, resource_name="", configs=[
                AlterableConfig(name="log.retention.ms", config_operation=SET, value="86400000")])]), 1)
    finally:
        raw.close()
    assert isinstance(resp, IncrementalAlterConfigsResponse) and resp.responses[0].error_code == 0, resp
    for n in c.node_ids:
        c.wait_until(lambda n=n: topic_config(c.ports[n], "dyn", "retention.ms") == ("86400000", DYNAMIC_DEFAULT_BROKER),
                     timeout=15, message=f"the cluster-wide retention on broker {n}")
