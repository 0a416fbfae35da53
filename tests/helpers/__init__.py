"""Shared test machinery: real broker subprocesses, condition waits, test data and round-trip checks."""

from .broker import REPO_ROOT, BrokerError, BrokerProcess, free_port, port_accepts
from .cluster import Cluster
from .records import Consumed, Msg, make_messages, unique_topic, verify_round_trip
from .wait import WaitTimeout, wait_until, wait_until_no_error

__all__ = [
    "REPO_ROOT",
    "BrokerError",
    "BrokerProcess",
    "Cluster",
    "Consumed",
    "Msg",
    "WaitTimeout",
    "free_port",
    "make_messages",
    "port_accepts",
    "unique_topic",
    "verify_round_trip",
    "wait_until",
    "wait_until_no_error",
]
