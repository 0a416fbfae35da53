"""The security settings, read and checked at start-up: a broker that could not serve a listener
it was given (no certificate for an SSL one, no users for a SASL one) refuses to start, with the
setting to fix."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ConfigError
from ..wire import WireSecurity
from .listeners import ListenerPlan, ListenerSpec, plan
from .sasl import MECHANISMS
from .tls import client_context

if TYPE_CHECKING:
    from ..config import BrokerConfig

CLIENT_AUTH = ("none", "requested", "required")


def enabled_mechanisms(cfg: BrokerConfig) -> list[str]:
    return [m.strip().upper() for m in cfg.sasl_enabled_mechanisms.split(",") if m.strip()]


def plain_users(cfg: BrokerConfig) -> dict[str, str]:
    """NAME -> PASSWORD from `sasl_plain_users` and the lines of `sasl_plain_users_file`."""
    entries = [e for e in cfg.sasl_plain_users.split(",") if e.strip()]
    if cfg.sasl_plain_users_file:
        try:
            text = Path(cfg.sasl_plain_users_file).read_text()
        except OSError as e:
            raise ConfigError("sasl_plain_users_file", cfg.sasl_plain_users_file,
                              f"cannot read the file: {e.strerror}") from None
        entries += [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, password = entry.strip().partition(":")
        if not sep or not name or not password:
            raise ConfigError("sasl_plain_users", "<hidden>", f"an entry for {name or '?'!r} is not NAME:PASSWORD")
        out[name] = password
    return out


def super_users(cfg: BrokerConfig) -> frozenset[str]:
    """Kafka's super.users: principals separated by ';'."""
    out = frozenset(p.strip() for p in cfg.super_users.split(";") if p.strip())
    for p in out:
        if not p.startswith("User:") or len(p) == len("User:"):
            raise ConfigError("super_users", cfg.super_users, f"{p!r} is not a principal (User:NAME)")
    return out


def wire_security(cfg: BrokerConfig, spec: ListenerSpec, controller: bool) -> WireSecurity | None:
    """How this broker reaches the listener `spec` of other brokers (or, `controller`, of the
    voters): over TLS if it is SSL or SASL_SSL, logged in as `sasl_inter_broker_username` if it is
    SASL. None: PLAINTEXT, as before."""
    if not spec.secured:
        return None
    mech = (cfg.sasl_mechanism_controller_protocol if controller else cfg.sasl_mechanism_inter_broker_protocol)
    return WireSecurity(client_context(cfg) if spec.tls else None, mech.strip().upper() if spec.sasl else "",
                        cfg.sasl_inter_broker_username, cfg.sasl_inter_broker_password)


def check(cfg: BrokerConfig) -> ListenerPlan:
    listeners = plan(cfg)
    if cfg.ssl_client_auth not in CLIENT_AUTH:
        raise ConfigError("ssl_client_auth", cfg.ssl_client_auth, f"must be one of {', '.join(CLIENT_AUTH)}")
    if cfg.ssl_endpoint_identification_algorithm not in ("https", ""):
        raise ConfigError("ssl_endpoint_identification_algorithm", cfg.ssl_endpoint_identification_algorithm,
                          "must be https or empty")
    tls = [s.name for s in listeners.all if s.tls]
    if tls and not cfg.ssl_keystore_location:
        raise ConfigError("ssl_keystore_location", "", f"listeners {', '.join(tls)} use TLS: a certificate is needed")
    if cfg.ssl_client_auth != "none" and not cfg.ssl_truststore_location:
        raise ConfigError("ssl_truststore_location", "", "client certificates are asked for: "
                          "the CA certificates to check them against are needed")
    for setting in ("ssl_keystore_location", "ssl_key_location", "ssl_truststore_location"):
        path = getattr(cfg, setting)
        if path and not Path(path).is_file():
            raise ConfigError(setting, path, "no such file")
    enabled = enabled_mechanisms(cfg)
    unknown = [m for m in enabled if m not in MECHANISMS]
    if unknown:
        raise ConfigError("sasl_enabled_mechanisms", cfg.sasl_enabled_mechanisms,
                          f"{', '.join(unknown)} not supported (supported: {', '.join(MECHANISMS)})")
    sasl = [s for s in listeners.all if s.sasl]
    if sasl and not enabled:
        raise ConfigError("sasl_enabled_mechanisms", "", "SASL listeners need at least one mechanism")
    plain_users(cfg)
    super_users(cfg)
    for spec, setting in ((listeners.inter_broker, "sasl_mechanism_inter_broker_protocol"),
                          (listeners.controller, "sasl_mechanism_controller_protocol")):
        if not spec.sasl:
            continue
        mech = getattr(cfg, setting).strip().upper()
        if mech not in enabled:
            raise ConfigError(setting, mech, f"listener {spec.name} is SASL, and {mech} is not enabled")
        if not cfg.sasl_inter_broker_username or not cfg.sasl_inter_broker_password:
            raise ConfigError("sasl_inter_broker_username", cfg.sasl_inter_broker_username,
                              f"listener {spec.name} is SASL: brokers need a login to use it")
    return listeners
