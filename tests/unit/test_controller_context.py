"""Issue 25: a controller-listener handler gets its own context — the metadata quorum and the
controller, nothing optional — not the client listener's, whose coordinators, fetch sessions and
forwarding it never uses; and a client-listener handler's context no longer carries the
controller's internals."""

from __future__ import annotations

import dataclasses
import inspect

from broker.apis import CONTROLLER_APIS
from broker.context import BrokerContext, ControllerContext

CLIENT_ONLY = {"groups", "txn", "producer_ids", "metrics", "replication", "controller_client", "propagation",
               "forwarder", "fetch_sessions"}


def test_the_controller_context_holds_the_quorum_and_controller_and_nothing_optional() -> None:
    fields = {f.name: str(f.type) for f in dataclasses.fields(ControllerContext)}
    assert {"quorum", "controller", "shell"} <= set(fields) and not set(fields) & CLIENT_ONLY
    assert [n for n, t in fields.items() if "None" in t] == []


def test_the_client_context_holds_no_controller_internals() -> None:
    names = {f.name for f in dataclasses.fields(BrokerContext)}
    assert not names & {"controller", "controller_shell", "shell"}


def test_every_controller_listener_handler_takes_the_controller_context() -> None:
    wrong = {key: h.__qualname__ for key, h in CONTROLLER_APIS.handlers.items()
             if "ControllerContext" not in str(inspect.signature(h).parameters["ctx"].annotation)}
    assert wrong == {}
