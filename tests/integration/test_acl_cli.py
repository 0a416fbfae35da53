"""`ketch acl add|list|remove` (and through it the client's Admin create_acls / describe_acls /
delete_acls) against a real broker with the authorizer on; a broker without it refuses them."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.broker import BrokerProcess

ON = {"KETCH_AUTHORIZER": "true", "KETCH_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}


def ketch(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=120)


def test_acl_add_list_remove(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(env=ON)
    r = ketch(b, "acl", "add", "--principal", "User:alice", "--topic", "pay-", "--resource-pattern-type", "prefixed",
              "--operation", "read", "--operation", "describe", "--json")
    assert r.returncode == 0, r.stderr
    assert [x["operation"] for x in json.loads(r.stdout)] == ["READ", "DESCRIBE"]
    r = ketch(b, "acl", "add", "--principal", "User:bob", "--transactional-id", "tx", "--operation", "write",
              "--permission", "deny")
    assert r.returncode == 0, r.stderr
    listed = json.loads(ketch(b, "acl", "list", "--json").stdout)
    assert {(x["principal"], x["resource_type"], x["pattern"], x["name"], x["permission"], x["operation"])
            for x in listed} == {("User:alice", "TOPIC", "PREFIXED", "pay-", "ALLOW", "READ"),
                                 ("User:alice", "TOPIC", "PREFIXED", "pay-", "ALLOW", "DESCRIBE"),
                                 ("User:bob", "TRANSACTIONAL_ID", "LITERAL", "tx", "DENY", "WRITE")}
    # the patterns that apply to one topic name
    applying = json.loads(ketch(b, "acl", "list", "--topic", "pay-eu", "--resource-pattern-type", "match",
                                "--json").stdout)
    assert {x["operation"] for x in applying} == {"READ", "DESCRIBE"}
    r = ketch(b, "acl", "remove", "--principal", "User:alice", "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 2
    assert [x["principal"] for x in json.loads(ketch(b, "acl", "list", "--json").stdout)] == ["User:bob"]
    refused = ketch(b, "acl", "remove")
    assert refused.returncode == 1 and "every ACL" in refused.stderr
    bad = ketch(b, "acl", "add", "--principal", "alice", "--topic", "t", "--operation", "read")
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr, bad.stderr


def test_without_the_authorizer_acls_are_refused(broker: BrokerProcess) -> None:
    r = ketch(broker, "acl", "list")
    assert r.returncode == 1 and "SECURITY_DISABLED" in r.stderr, r.stderr
