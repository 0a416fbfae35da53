"""Dynamic broker configs (Kafka's, kept as ConfigRecords in the metadata log): the broker-level
defaults of topic configs, set cluster-wide (resource name "") or for one broker (its id) with
IncrementalAlterConfigs / AlterConfigs on a BROKER resource, and applied by every broker without a
restart. A topic's setting comes from, most specific first: its own override, the broker's
dynamic config, the cluster-wide dynamic default, the static broker setting (ketch.toml, KETCH_*
variables, flags), Kafka's default — DescribeConfigs reports each with Kafka's source.

Only the broker-level names of topic configs (log.retention.ms, min.insync.replicas, ...) are
dynamic here; every other broker setting stays static. As Kafka 4.1's controller does, the active
controller writes the cluster-wide min.insync.replicas when it finds none (controller/quorum_controller.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.errors import ErrorCode, KafkaError

from ..config_catalog import TOPIC_CONFIG_DEFS, check_value
from .image import MetadataImage

# Kafka's ConfigSource ids (DescribeConfigs)
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 2, 3

# broker-level name -> the topic config it is the default of
TOPIC_DEFAULTS: dict[str, str] = {d.synonyms[0]: d.name for d in TOPIC_CONFIG_DEFS if d.synonyms}


def check(configs: Mapping[str, str | None]) -> None:
    """INVALID_CONFIG (Kafka's words) for a name that is not a dynamic broker config here, or a
    value its topic config would refuse."""
    for name, value in configs.items():
        topic_config = TOPIC_DEFAULTS.get(name)
        if topic_config is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Cannot update these configs dynamically: [{name}] (Ketch updates only the broker "
                             "defaults of topic configs dynamically; other settings are static)")
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"config {name!r} has no value")
        check_value(topic_config, value)


def topic_defaults(image: MetadataImage, node_id: int) -> dict[str, tuple[str, str, int]]:
    """Topic config -> (broker-level name, value, source) for what the dynamic configs set for
    broker `node_id`: its own value, else the cluster-wide default."""
    own = image.broker_configs.get(str(node_id), {})
    cluster = image.broker_configs.get("", {})
    out = {}
    for name, topic_config in TOPIC_DEFAULTS.items():
        if name in own:
            out[topic_config] = (name, own[name], SOURCE_DYNAMIC_BROKER)
        elif name in cluster:
            out[topic_config] = (name, cluster[name], SOURCE_DYNAMIC_DEFAULT_BROKER)
    return out
