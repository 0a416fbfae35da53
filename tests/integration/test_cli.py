"""`ketch topic ...` against a real broker process."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import BrokerProcess


def ketch(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_topic_create_list_delete(broker: BrokerProcess) -> None:
    r = ketch(broker, "topic", "create", "cli-t", "--partitions", "3", "--config", "retention.ms=60000")
    assert r.returncode == 0, r.stderr
    listed = json.loads(ketch(broker, "topic", "list", "--json").stdout)
    assert {"topic": "cli-t", "partitions": 3, "internal": False} in listed
    again = ketch(broker, "topic", "create", "cli-t")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    bad = ketch(broker, "topic", "create", "cli-bad", "--config", "no.such=1")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    assert ketch(broker, "topic", "delete", "cli-t").returncode == 0
    assert all(t["topic"] != "cli-t" for t in json.loads(ketch(broker, "topic", "list", "--json").stdout))
