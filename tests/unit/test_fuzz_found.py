"""Bugs the fuzzing campaign (tests/helpers/fuzz) found, each pinned where it lives.

Kafka's generated decoders refuse a null in a field that is not nullable in that version
("non-nullable field ... was serialized as null") and the request fails to parse, so the
connection is closed. Ketch decoded the null and handed None to the handler, which raised
(DeleteGroups v1, FindCoordinator v5, IncrementalAlterConfigs v1, ElectLeaders v2 were seen).
And a client id that is not UTF-8 raised out of data_received instead of closing the connection
as a malformed header.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from broker.apis import CLIENT_APIS
from broker.connection import Connection, ConnectionRegistry
from broker.metrics import BrokerMetrics
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.registry import REQUESTS, RESPONSES
from protocol.primitives import DecodeError, Reader
from protocol.schema import Array, Message, _Bytes, _String


@pytest.mark.parametrize(("msg", "version"), [
    (DeleteGroupsRequest(groups_names=None), 1),  # type: ignore[arg-type]
    (DeleteGroupsRequest(groups_names=None), 2),  # type: ignore[arg-type]
    (DeleteGroupsRequest(groups_names=["g", None]), 2),  # type: ignore[list-item]
    (FindCoordinatorRequest(key_type=0, coordinator_keys=None), 5),  # type: ignore[arg-type]
    (IncrementalAlterConfigsRequest(resources=None), 1),  # type: ignore[arg-type]
    (ElectLeadersRequest(election_type=0, topic_partitions=[TopicPartitions(topic=None, partitions=[0])]), 2),  # type: ignore[arg-type]
])
def test_a_null_in_a_field_kafka_never_lets_be_null_does_not_decode(msg: Message, version: int) -> None:
    data = msg.encode(version)
    with pytest.raises(DecodeError, match="null"):
        type(msg).read(Reader(data), version)


def test_the_nullable_fields_still_decode_null() -> None:
    req = ElectLeadersRequest(election_type=0, topic_partitions=None)  # null: every partition
    assert ElectLeadersRequest.read(Reader(req.encode(2)), 2) == req


def _kafka_definitions() -> Path:
    """Kafka's message definitions as kafka-python (a dev dependency) ships them."""
    import kafka  # noqa: PLC0415

    return Path(kafka.__file__).parent / "protocol/schemas/resources"


def _mismatches(cls: type[Any], fields: list[dict[str, Any]], path: str) -> list[str]:
    by_name = {f["name"].lower(): f for f in fields}
    out = []
    for fl in dataclasses.fields(cls):
        ft = fl.metadata.get("ktype")
        j = by_name.get(fl.name.replace("_", "").lower())
        if ft is None or j is None:
            continue
        if isinstance(ft, Array | _String | _Bytes) and ("None" in str(fl.type)) != ("nullableVersions" in j):
            out.append(f"{path}.{fl.name}: ours {fl.type}, Kafka nullableVersions={j.get('nullableVersions')}")
        sub = ft.item if isinstance(ft, Array) else getattr(ft, "cls", None)
        if isinstance(sub, type) and "fields" in j:
            out += _mismatches(sub, j["fields"], f"{path}.{fl.name}")
    return out


def test_what_our_annotations_call_nullable_is_what_kafkas_definitions_do() -> None:
    """The decoder refuses null where the field's annotation has no `| None`: that must be exactly
    Kafka's nullableVersions, for every API Kafka's JSON (as kafka-python ships it) defines."""
    resources = _kafka_definitions()
    compared, bad = 0, []
    for key, req in REQUESTS.items():
        for cls in (req, RESPONSES[key]):
            path = resources / f"{cls.__name__}.json"
            if not path.exists():
                continue  # the quorum's and brokers' own APIs: not in kafka-python
            compared += 1
            spec = json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))
            bad += _mismatches(cls, spec["fields"], cls.__name__)
    assert compared > 60 and bad == []


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.1", 1) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        self.closed = True


async def test_a_client_id_that_is_not_utf8_closes_the_connection_as_a_malformed_header() -> None:
    registry = ConnectionRegistry(BrokerMetrics(), 1 << 20, 100, lambda _: None)
    conn = Connection(object(), CLIENT_APIS, registry, ("127.0.0.1", 9092))
    t = _Transport()
    conn.connection_made(t)
    body = struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe"
    conn.data_received(struct.pack(">i", len(body)) + body)
    assert t.closed and registry.metrics.connections_aborted["malformed request header"] == 1


class _SlowQuorum:
    """A quorum whose proposals commit only when told to."""

    serving = True

    def __init__(self) -> None:
        self.commit = asyncio.Event()
        self.proposed: list[bytes] = []

    async def propose(self, entry: bytes, timeout: float) -> bool:
        self.proposed.append(entry)
        await self.commit.wait()
        return True


async def test_a_request_cancelled_while_its_change_commits_does_not_let_the_next_decision_in_early() -> None:
    """The fuzzer's connections close at once; closing a connection cancels its handlers. A
    CreateTopics cancelled while its TopicRecord was being committed released the controller's
    one-decision-at-a-time lock, so the next CreateTopics of the same name was decided on an image
    without the first: two TopicRecords for one name committed, the second refused by every broker
    ("metadata entry not applied: topic fz0 ... exists already"; the same for two RemoveTopicRecords)."""
    from broker.controller.shell import ControllerShell  # noqa: PLC0415

    quorum = _SlowQuorum()
    shell = ControllerShell(quorum, object())  # type: ignore[arg-type]
    decided: list[str] = []

    def decide(name: str) -> Any:
        return lambda: (decided.append(name), (name.encode(), name))[1]

    first = asyncio.get_running_loop().create_task(shell.run(decide("first")))
    while not quorum.proposed:
        await asyncio.sleep(0)
    first.cancel()  # the client went away
    second = asyncio.get_running_loop().create_task(shell.run(decide("second")))
    for _ in range(20):
        await asyncio.sleep(0)
    assert decided == ["first"], "the second decision was taken before the first change committed"
    quorum.commit.set()
    assert await second == "second"
    assert decided == ["first", "second"]
