"""Issue 27: Kafka's listener settings — listeners, advertised.listeners,
listener.security.protocol.map, inter.broker.listener.name, controller.listener.names — parsed
into the listeners a broker opens (broker/security/listeners.py), and the security settings
checked when the broker starts (BrokerServer runs check() first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError, load_config
from broker.security.listeners import ListenerSpec, parse_listeners, parse_protocol_map, plan
from broker.security.settings import check, plain_users, super_users
from broker.security.tls import subject_name


def test_without_listeners_the_broker_opens_what_it_always_did() -> None:
    p = plan(BrokerConfig())
    assert p.clients == (ListenerSpec("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"),)
    assert p.inter_broker == ListenerSpec("BROKER", "127.0.0.1", 0, "PLAINTEXT")
    assert p.controller == ListenerSpec("CONTROLLER", "127.0.0.1", 0, "PLAINTEXT")
    adv = plan(BrokerConfig(listen="0.0.0.0:9093", advertise="kafka:9093", inter_broker_advertise="ib:1"))
    assert adv.clients[0].advertised == ("kafka", 9093) and adv.inter_broker.advertised == ("ib", 1)


def test_several_client_listeners_with_their_protocols() -> None:
    cfg = BrokerConfig(
        listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093,BROKER://127.0.0.1:9094,"
                  "CONTROLLER://127.0.0.1:9095,sasl_ssl://[::1]:9096",
        advertised_listeners="EXTERNAL://kafka.example.com:443",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,BROKER:SSL",
        ssl_keystore_location=__file__)
    p = plan(cfg)
    assert p.clients == (ListenerSpec("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"),
                         ListenerSpec("EXTERNAL", "0.0.0.0", 9093, "SASL_SSL", ("kafka.example.com", 443)),
                         ListenerSpec("SASL_SSL", "::1", 9096, "SASL_SSL"))
    assert p.inter_broker == ListenerSpec("BROKER", "127.0.0.1", 9094, "SSL")
    assert p.controller == ListenerSpec("CONTROLLER", "127.0.0.1", 9095, "PLAINTEXT")
    assert [s.tls for s in p.clients] == [False, True, True] and p.clients[1].sasl and p.inter_broker.secured


def test_named_inter_broker_and_controller_listeners() -> None:
    p = plan(BrokerConfig(listeners="CLIENT://:9092,REPL://:9093", inter_broker_listener_name="repl",
                          controller_listener_names="QUORUM", voters="1@127.0.0.1:9099",
                          listener_security_protocol_map="CLIENT:PLAINTEXT,REPL:PLAINTEXT,QUORUM:PLAINTEXT"))
    assert [c.name for c in p.clients] == ["CLIENT"] and p.inter_broker.name == "REPL" and p.inter_broker.port == 9093
    assert p.controller == ListenerSpec("QUORUM", "127.0.0.1", 9099, "PLAINTEXT")


@pytest.mark.parametrize("settings,problem", [
    ({"listeners": "PLAINTEXT:/x:1"}, "NAME://HOST:PORT"),
    ({"listeners": "PLAINTEXT://h:1,plaintext://h:2"}, "named twice"),
    ({"listeners": "PLAINTEXT://h:1,SSL://h:1"}, "one port"),
    ({"listeners": "FOO://h:1"}, "no security protocol for listener FOO"),
    ({"listener_security_protocol_map": "FOO:TLS"}, "not one of"),
    ({"listeners": "BROKER://h:1"}, "no client listener"),
    ({"listeners": "PLAINTEXT://h:1", "listen": "0.0.0.0:1234"}, "either listen or listeners"),
    ({"advertised_listeners": "OTHER://h:1"}, "not one of the listeners"),
    ({"controller_listener_names": "BROKER"}, "cannot be the inter-broker"),
    ({"listeners": "SSL://h:1"}, "certificate is needed"),
    ({"ssl_client_auth": "always"}, "none, requested, required"),
    ({"sasl_enabled_mechanisms": "GSSAPI"}, "not supported"),
    ({"listener_security_protocol_map": "BROKER:SASL_PLAINTEXT"}, "brokers need a login"),
    ({"listener_security_protocol_map": "CONTROLLER:SASL_PLAINTEXT", "sasl_inter_broker_username": "b",
      "sasl_inter_broker_password": "p", "sasl_enabled_mechanisms": "SCRAM-SHA-256"}, "PLAIN is not enabled"),
    ({"super_users": "broker"}, "not a principal"),
    ({"sasl_plain_users": "alice"}, "NAME:PASSWORD"),
])
def test_refused_settings(settings: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        check(load_config(None, env={}, overrides=settings))


def test_kafka_names_in_the_file(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("# PLAIN users\nalice:a-pw\nbob:b:pw\n")
    f = tmp_path / "k.toml"
    f.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:9092"\n'
                 '"super.users" = "User:broker; User:admin"\n'
                 f'"sasl.plain.users.file" = "{users}"\n"sasl.plain.users" = "carol:c"\n')
    cfg = load_config(f, env={})
    check(cfg)
    assert plan(cfg).clients[0].protocol == "SASL_PLAINTEXT"
    assert super_users(cfg) == {"User:broker", "User:admin"}
    assert plain_users(cfg) == {"alice": "a-pw", "bob": "b:pw", "carol": "c"}


def test_parse_helpers() -> None:
    assert parse_listeners("listeners", "a://h:1, B://:2") == [("A", "h", 1), ("B", "", 2)]
    assert parse_protocol_map("")["SASL_SSL"] == "SASL_SSL" and parse_protocol_map("x:ssl")["X"] == "SSL"


def test_certificate_subject_as_kafka_names_it() -> None:
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
                        (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}
    assert subject_name(cert) == "CN=alice,OU=eng,O=Acme\\, Inc,C=US"
    assert subject_name({}) is None
