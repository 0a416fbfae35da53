"""Kafka's listener settings, parsed and checked: which listeners a broker opens, where, and with
which security protocol — sans I/O (broker/server.py binds them).

A broker has three kinds of listener: client listeners (one or several: an internal and an
external one, say), the inter-broker listener (`inter_broker_listener_name`; what only brokers may
ask is served there, to brokers) and the controller listener (the first of
`controller_listener_names`; the metadata quorum). `listeners` names them NAME://HOST:PORT as
Kafka does; each name's security protocol comes from `listener_security_protocol_map`, where the
four protocol names map to themselves and BROKER and CONTROLLER to PLAINTEXT unless told
otherwise. Without `listeners`, the broker opens what it always did: PLAINTEXT on `listen`, the
inter-broker listener on `inter_broker_listen`, the controller listener on `controller_listen`
(or this node's voter address).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import ConfigError, parse_host_port

if TYPE_CHECKING:
    from ..config import BrokerConfig

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
# Kafka's SecurityProtocol ids, as BrokerRegistration and RegisterBrokerRecord carry them
PROTOCOL_IDS = {PLAINTEXT: 0, SSL: 1, SASL_PLAINTEXT: 2, SASL_SSL: 3}
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str
    host: str
    port: int  # 0: any free port
    protocol: str
    advertised: tuple[str, int] | None = None  # None: the bound address

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def secured(self) -> bool:
        """Peers on it say who they are (a SASL login, or a client certificate the broker may ask for)."""
        return self.protocol != PLAINTEXT


@dataclass(frozen=True, slots=True)
class ListenerPlan:
    clients: tuple[ListenerSpec, ...]
    inter_broker: ListenerSpec
    controller: ListenerSpec

    @property
    def all(self) -> tuple[ListenerSpec, ...]:
        return (*self.clients, self.inter_broker, self.controller)


def parse_listeners(setting: str, value: str) -> list[tuple[str, str, int]]:
    """'NAME://HOST:PORT,...' -> [(name, host, port)], names upper-cased and each named once."""
    out: list[tuple[str, str, int]] = []
    for part in (p.strip() for p in value.split(",") if p.strip()):
        name, sep, hostport = part.partition("://")
        if not sep or not _NAME.match(name):
            raise ConfigError(setting, value, f"{part!r} is not NAME://HOST:PORT")
        host, port = parse_host_port(setting, hostport)
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        name = name.upper()
        if any(n == name for n, _, _ in out):
            raise ConfigError(setting, value, f"listener {name} is named twice")
        out.append((name, host, port))
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    """Kafka's default map, with 'NAME:PROTOCOL,...' on top; a ConfigError for an unknown protocol."""
    out = {p: p for p in PROTOCOL_IDS}
    out.update({"BROKER": PLAINTEXT, "CONTROLLER": PLAINTEXT})
    for part in (p.strip() for p in value.split(",") if p.strip()):
        name, sep, protocol = part.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not _NAME.match(name.strip()):
            raise ConfigError("listener_security_protocol_map", value, f"{part!r} is not NAME:PROTOCOL")
        if protocol not in PROTOCOL_IDS:
            raise ConfigError("listener_security_protocol_map", value,
                              f"{protocol!r} is not one of {', '.join(PROTOCOL_IDS)}")
        out[name.strip().upper()] = protocol
    return out


def plan(cfg: BrokerConfig) -> ListenerPlan:
    """The listeners `cfg` asks for, or a ConfigError saying what is wrong with them."""
    protocols = parse_protocol_map(cfg.listener_security_protocol_map)
    ib_name = cfg.inter_broker_listener_name.strip().upper()
    controller_names = [n.strip().upper() for n in cfg.controller_listener_names.split(",") if n.strip()]
    if not ib_name:
        raise ConfigError("inter_broker_listener_name", cfg.inter_broker_listener_name, "must name a listener")
    if not controller_names:
        raise ConfigError("controller_listener_names", cfg.controller_listener_names, "must name a listener")
    ctl_name = controller_names[0]
    if ctl_name == ib_name:
        raise ConfigError("controller_listener_names", cfg.controller_listener_names,
                          "the controller listener cannot be the inter-broker listener")
    listed = parse_listeners("listeners", cfg.listeners)
    if listed and cfg.listen != _default_listen():
        raise ConfigError("listen", cfg.listen, "set either listen or listeners, not both")
    advertised = {n: (h, p) for n, h, p in parse_listeners("advertised_listeners", cfg.advertised_listeners)}
    by_name = {n: (h, p) for n, h, p in listed}
    for name in advertised:
        if name not in by_name and name != ib_name and not (name == "PLAINTEXT" and not listed):
            raise ConfigError("advertised_listeners", cfg.advertised_listeners, f"{name} is not one of the listeners")

    def protocol_of(name: str) -> str:
        if name not in protocols:
            raise ConfigError("listener_security_protocol_map", cfg.listener_security_protocol_map,
                              f"no security protocol for listener {name}")
        return protocols[name]

    if listed:
        clients = tuple(ListenerSpec(n, h, p, protocol_of(n), advertised.get(n))
                        for n, h, p in listed if n != ib_name and n not in controller_names)
    else:
        host, port = parse_host_port("listen", cfg.listen)
        adv = parse_host_port("advertise", cfg.advertise) if cfg.advertise else advertised.get("PLAINTEXT")
        clients = (ListenerSpec("PLAINTEXT", host, port, protocol_of("PLAINTEXT"), adv),)
    if not clients:
        raise ConfigError("listeners", cfg.listeners, "no client listener (only the inter-broker and controller ones)")
    ib_host, ib_port = by_name.get(ib_name) or parse_host_port("inter_broker_listen", cfg.inter_broker_listen)
    ib_adv = (parse_host_port("inter_broker_advertise", cfg.inter_broker_advertise) if cfg.inter_broker_advertise
              else advertised.get(ib_name))
    inter_broker = ListenerSpec(ib_name, ib_host, ib_port, protocol_of(ib_name), ib_adv)
    voters = cfg.voter_map()
    if voters:
        c_host, c_port = voters[cfg.node_id]
        if ctl_name in by_name and by_name[ctl_name][1] not in (0, c_port):
            raise ConfigError("listeners", cfg.listeners, f"{ctl_name} is on port {by_name[ctl_name][1]}, "
                              f"but the voters put node {cfg.node_id} on port {c_port}")
    else:
        c_host, c_port = by_name.get(ctl_name) or parse_host_port("controller_listen", cfg.controller_listen)
    controller = ListenerSpec(ctl_name, c_host, c_port, protocol_of(ctl_name))
    ports = [s.port for s in (*clients, inter_broker, controller) if s.port]
    if len(ports) != len(set(ports)):
        raise ConfigError("listeners", cfg.listeners or cfg.listen, "two listeners on one port")
    return ListenerPlan(clients, inter_broker, controller)


def _default_listen() -> str:
    from ..config import BrokerConfig  # noqa: PLC0415 - config imports this module lazily too

    return BrokerConfig.listen
