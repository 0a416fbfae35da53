"""Settings precedence: default < TOML file < KETCH_* environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import load_config
from broker.group.coordinator import settings_from


def test_defaults() -> None:
    c = load_config(env={})
    assert (c.listen, c.data_dir, c.node_id) == ("0.0.0.0:9092", "./data", 1)
    assert c.advertised_host_port == ("localhost", 9092)
    assert c.auto_create_topics is True and c.flush_messages is None


def test_precedence(tmp_path: Path) -> None:
    f = tmp_path / "k.toml"
    f.write_text('num_partitions = 3\nflush_messages = 1\nlisten = "127.0.0.1:1234"\n')
    c = load_config(f, env={"KETCH_NUM_PARTITIONS": "6", "KETCH_AUTO_CREATE_TOPICS": "false"},
                    overrides={"listen": "127.0.0.1:5555", "data_dir": None})
    assert c.num_partitions == 6  # env beats file
    assert c.flush_messages == 1  # file beats default
    assert c.auto_create_topics is False
    assert c.listen == "127.0.0.1:5555"  # flag beats file
    assert c.data_dir == "./data"  # an unset flag changes nothing
    assert c.advertised_host_port == ("127.0.0.1", 5555)


def test_unknown_file_setting_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "k.toml"
    f.write_text("no_such_setting = 1\n")
    with pytest.raises(ValueError, match="no_such_setting"):
        load_config(f, env={})


def test_group_max_size_defaults_to_kafkas_and_reaches_the_coordinator(tmp_path: Path) -> None:
    assert load_config(env={}).group_max_size == 2_147_483_647  # Kafka's Integer.MAX_VALUE
    assert settings_from(load_config(env={"KETCH_GROUP_MAX_SIZE": "2"})).max_group_size == 2
    f = tmp_path / "k.toml"
    f.write_text("group_max_size = 5\n")
    assert settings_from(load_config(f, env={})).max_group_size == 5


def test_the_quorum_voters_from_file_environment_and_their_errors(tmp_path: Path) -> None:
    from broker.config import ConfigError  # noqa: PLC0415

    f = tmp_path / "ketch.toml"
    f.write_text('voters = "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"\nnode_id = 2\n')
    assert load_config(f, env={}).voter_map() == {1: ("127.0.0.1", 9101), 2: ("127.0.0.1", 9102),
                                                  3: ("127.0.0.1", 9103)}
    env = {"KETCH_VOTERS": "1@h:1,4@h:4", "KETCH_NODE_ID": "4"}
    assert sorted(load_config(None, env=env).voter_map()) == [1, 4]
    assert load_config(None, env={}).voter_map() == {}  # alone: a one-voter quorum of this node
    for voters, node, problem in [("1@h:1,2@h:2", 3, "not one of the voters"), ("one@h:1", 1, "NODE_ID@HOST:PORT"),
                                  ("1@h:1,1@h:2", 1, "named twice"), ("1@h", 1, "HOST:PORT")]:
        with pytest.raises(ConfigError, match=problem):
            load_config(None, env={"KETCH_VOTERS": voters, "KETCH_NODE_ID": str(node)})


def test_log_dirs_take_precedence_over_the_one_data_dir_and_hold_the_metadata_first(tmp_path: Path) -> None:
    """Kafka's rule: log.dirs over log.dir (ours: data_dir, --data-dir); metadata.log.dir defaults
    to the first log directory."""
    from broker.config import ConfigError  # noqa: PLC0415

    one = load_config(env={}, overrides={"data_dir": "/srv/one"})
    assert one.log_dir_paths == ["/srv/one"] and one.metadata_dir == "/srv/one"
    both = load_config(env={"KETCH_LOG_DIRS": "/srv/a, /srv/b,"}, overrides={"data_dir": "/srv/one"})
    assert both.log_dir_paths == ["/srv/a", "/srv/b"] and both.metadata_dir == "/srv/a"
    f = tmp_path / "k.toml"
    f.write_text('"log.dirs" = "/x,/y"\n"metadata.log.dir" = "/y"\n')  # Kafka's names work in the file
    from_file = load_config(f, env={})
    assert from_file.log_dir_paths == ["/x", "/y"] and from_file.metadata_dir == "/y"
    with pytest.raises(ConfigError, match="log_dirs.*twice"):
        load_config(env={"KETCH_LOG_DIRS": "/srv/a,/srv/b/../a"})
    with pytest.raises(ConfigError, match="log_dirs.*nested"):
        load_config(env={"KETCH_LOG_DIRS": "/srv/a,/srv/a/b"})


def test_describe_configs_names_the_log_directories_as_kafka_does() -> None:
    from broker.config import BrokerConfig  # noqa: PLC0415
    from broker.config_catalog import broker_entries  # noqa: PLC0415

    def entries(cfg: BrokerConfig) -> dict[str, tuple[str | None, bool]]:
        return {e.name: (e.value, e.is_default) for e in broker_entries(cfg, BrokerConfig(), "h:1", "h:2", {})
                if e.name in ("log.dirs", "log.dir", "metadata.log.dir")}

    assert entries(BrokerConfig(data_dir="/d")) == {"log.dirs": ("/d", True), "log.dir": ("/d", False),
                                                   "metadata.log.dir": (None, True)}
    assert entries(BrokerConfig(log_dirs="/a,/b", metadata_log_dir="/m")) == {
        "log.dirs": ("/a,/b", False), "log.dir": ("./data", True), "metadata.log.dir": ("/m", False)}
