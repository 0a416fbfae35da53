"""A process imports only the parts of the client and the message classes it uses.

Every streaming query starts a fresh Python process on the Spark driver (Spark's streaming source
runner) that imports `pipeline` and through it `client`; building every message class at import
cost about 0.15 s of that, `client.admin` another 0.2 s (docs/pipeline.md, Performance). So
`client` exports its names lazily, the registry of APIs imports an API's module the first time its
key is looked up, and the source runner never needs the admin client. These tests run each import
in a fresh interpreter: in this one, other tests have long loaded everything.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import protocol.messages
from protocol.messages.registry import REQUESTS, RESPONSES
from protocol.schema import Message

ROOT = Path(__file__).resolve().parents[2]
# Modules of protocol/messages/ that hold no API (records of internal topics, the registry itself).
NOT_APIS = {"registry", "coordinator_records", "metadata_records"}
API_MODULES = {m.name for m in pkgutil.iter_modules(protocol.messages.__path__)} - NOT_APIS
# APIs only brokers and controllers speak to each other: no client process needs their classes.
BROKER_ONLY = {"vote", "begin_quorum_epoch", "end_quorum_epoch", "fetch_snapshot", "allocate_producer_ids",
               "broker_registration", "broker_heartbeat", "alter_partition", "assign_replicas_to_dirs",
               "write_txn_markers", "share_group_state", "get_replica_log_info"}


def _run(code: str) -> str:
    """`code` run by a fresh interpreter from the repository root; its last line of output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _loaded_after(code: str) -> set[str]:
    return set(json.loads(_run(f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")))


def _apis(modules: set[str]) -> set[str]:
    return {m.rpartition(".")[2] for m in modules if m.startswith("protocol.messages.")} - NOT_APIS


def test_a_consumer_imports_neither_the_admin_client_nor_most_apis() -> None:
    loaded = _loaded_after("import client\nfrom client import Consumer")
    unwanted = {"client.admin", "client.producer", "client.share_consumer"}
    assert not loaded & unwanted, sorted(loaded & unwanted)
    apis = _apis(loaded)
    assert not apis & BROKER_ONLY
    assert len(apis) < len(API_MODULES) // 3, sorted(apis)


def test_a_consumer_without_a_group_imports_no_group_protocol() -> None:
    # The source's planner and readers consume without a group: JoinGroup, SyncGroup, the
    # assignors and KIP-848's heartbeats are the sink's marker reader's business, in the workers.
    group_modules = {"client.group", "client.group_consumer", "client.group_offsets", "client.assignors"}
    loaded = _loaded_after("from client import Consumer\nConsumer('localhost:1')")
    assert not loaded & group_modules, sorted(loaded & group_modules)
    for group_protocol in ("classic", "consumer"):
        loaded = _loaded_after(f"from client import Consumer\nConsumer('localhost:1', group_id='g', "
                               f"group_protocol={group_protocol!r})")
        assert "client.group_offsets" in loaded


def test_the_source_runner_imports_neither_the_sink_nor_the_admin_client() -> None:
    # What Spark's streaming source runner does first: unpickle the data source (importing its
    # module), then make the stream reader.
    loaded = _loaded_after("from pipeline.datasource import KetchDataSource\n"
                           "KetchDataSource({'kafka.bootstrap.servers': 'localhost:1', 'subscribe': 't'})"
                           ".streamReader(None)")
    assert {"pipeline.source", "pipeline.broker_io"} <= loaded
    unwanted = {"client.admin", "client.producer", "pipeline.sink", "pipeline.exactly_once", "pipeline.atomic",
                "pipeline.session"}
    assert not loaded & unwanted, sorted(loaded & unwanted)
    assert not _apis(loaded) & BROKER_ONLY


def test_every_api_key_resolves_to_the_classes_its_module_defines() -> None:
    requests: dict[int, type[Message]] = {}
    responses: dict[int, type[Message]] = {}
    for name in sorted(API_MODULES):
        module = importlib.import_module(f"protocol.messages.{name}")
        for cls in vars(module).values():
            if isinstance(cls, type) and issubclass(cls, Message) and cls.__module__ == module.__name__:
                side = requests if cls.__name__.endswith("Request") else responses
                assert cls.API_KEY not in side, cls
                side[cls.API_KEY] = cls
    assert set(REQUESTS) == set(requests) and len(REQUESTS) == len(requests)
    assert set(RESPONSES) == set(responses)
    for key in requests:
        assert REQUESTS[key] is requests[key] and RESPONSES[key] is responses[key]
        assert key in REQUESTS and REQUESTS.get(key) is requests[key]
    assert dict(REQUESTS.items()) == requests and list(RESPONSES.values()) == [responses[k] for k in RESPONSES]
    assert 999 not in REQUESTS and REQUESTS.get(999) is None and RESPONSES.get(999, "none") == "none"


def test_a_request_looked_up_lazily_still_refuses_nulls() -> None:
    # FindCoordinator v0's key is a string that may not be null: a broker decoding it through the
    # registry must refuse the null (length -1), as when every request was loaded at import.
    out = _run("from protocol.messages.registry import REQUESTS\n"
               "from protocol.primitives import DecodeError\n"
               "try:\n"
               "    print(REQUESTS[10].decode(b'\\xff\\xff', 0))\n"
               "except DecodeError:\n"
               "    print('refused')")
    assert out == "refused"


def test_iterating_the_registry_loads_every_api() -> None:
    loaded = _loaded_after("from protocol.messages.registry import REQUESTS\nall(REQUESTS.values())")
    assert _apis(loaded) == API_MODULES
