"""Settings a broker cannot start with: one line naming the setting, the value and the problem,
a non-zero exit, no traceback, and the data directory left as it was (issue 11, item 12)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import REPO_ROOT, BrokerProcess, free_port


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args], cwd=cwd or REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode not in (0, None), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def _broker(tmp_path: Path, *extra: str) -> list[str]:
    return ["broker", "--data-dir", str(tmp_path / "data"), *extra]


@pytest.mark.parametrize("listen, problem", [
    ("127.0.0.1:notaport", "port must be a number"),
    ("127.0.0.1:70000", "port must be a number"),
    ("no-port-at-all", "expected HOST:PORT"),
])
def test_a_bad_listen_address(tmp_path: Path, listen: str, problem: str) -> None:
    proc = _run(_broker(tmp_path, "--listen", listen))
    _one_line_error(proc, "listen", repr(listen), problem)
    assert not (tmp_path / "data").exists()


def test_a_port_already_in_use_leaves_the_data_directory_alone(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{port}"))
    _one_line_error(proc, "listen", f"127.0.0.1:{port}", "cannot listen there")
    assert not (tmp_path / "data").exists()


def test_a_metrics_port_already_in_use(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}",
                            "--metrics-listen", f"127.0.0.1:{port}"))
    _one_line_error(proc, "metrics_listen", "cannot listen there")
    assert not (tmp_path / "data").exists()


def test_a_setting_from_the_environment_that_is_not_a_number(tmp_path: Path) -> None:
    proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}"), env={"KETCH_FLUSH_MESSAGES": "abc"})
    _one_line_error(proc, "flush_messages", "'abc'", "KETCH_FLUSH_MESSAGES", "whole number")
    assert not (tmp_path / "data").exists()


def test_an_unknown_key_in_the_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "ketch.toml"
    f.write_text('listen = "127.0.0.1:0"\nflush_mesages = 1\n')
    proc = _run(_broker(tmp_path, "--config", str(f)))
    _one_line_error(proc, "flush_mesages", "unknown setting", str(f))
    assert not (tmp_path / "data").exists()


def test_a_toml_value_of_the_wrong_type(tmp_path: Path) -> None:
    f = tmp_path / "ketch.toml"
    f.write_text('num_partitions = "many"\n')
    proc = _run(_broker(tmp_path, "--config", str(f), "--listen", f"127.0.0.1:{free_port()}"))
    _one_line_error(proc, "num_partitions", "'many'", "whole number")


def test_a_missing_or_broken_toml_file(tmp_path: Path) -> None:
    _one_line_error(_run(_broker(tmp_path, "--config", str(tmp_path / "nope.toml"))), "config", "cannot read")
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml\n")
    _one_line_error(_run(_broker(tmp_path, "--config", str(bad))), "config", "not valid TOML")


def test_a_data_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    proc = _run(["broker", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(blocker / "data")])
    _one_line_error(proc, "data_dir", "cannot create the directory")
    assert blocker.read_text() == "not a directory\n"


def test_a_negative_value(tmp_path: Path) -> None:
    proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}"), env={"KETCH_NUM_PARTITIONS": "0"})
    _one_line_error(proc, "num_partitions", "at least 1")


def test_the_admin_cli_refuses_a_bad_bootstrap_address_in_one_line(tmp_path: Path) -> None:
    proc = _run(["topic", "list", "--bootstrap", "notaport"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bootstrap" in proc.stderr and "expected HOST:PORT" in proc.stderr


def test_the_admin_cli_says_nothing_listens_at_the_bootstrap_address_in_one_line() -> None:
    """Not 30 s of retries against a refused port: within the CLI's 5 s, one line naming it."""
    port = free_port()  # nothing listens there
    proc = subprocess.run([sys.executable, "-m", "broker", "topic", "list", "--bootstrap", f"127.0.0.1:{port}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=15)
    _one_line_error(proc, "no broker reachable", f"127.0.0.1:{port}", "connection refused")


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_a_data_directory_with_internal_topics_in_the_old_ketch_layout_is_refused(tmp_path: Path,
                                                                                  internal: str) -> None:
    """Issue 10: before topics.json version 2 the internal topics held Ketch's own record layout;
    read as Kafka's records they would be misread, so the broker names the topic and stops."""
    data = tmp_path / "data"
    (data / f"{internal}-0").mkdir(parents=True)
    table = json.dumps({"version": 1, "topics": [{"name": internal, "id": "7d9c7e0e-1f3b-4d35-9d0c-2f4c1b0e9a11",
                                                  "partitions": 1, "configs": {}}]})
    (data / "topics.json").write_text(table)
    proc = _run(_broker(tmp_path, "--listen", f"127.0.0.1:{free_port()}"))
    _one_line_error(proc, "data_dir", internal, "layout", "empty data directory")
    assert (data / "topics.json").read_text() == table and (data / f"{internal}-0").is_dir()


def test_an_old_data_directory_without_internal_topics_still_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "plain-0").mkdir(parents=True)
    (data / "topics.json").write_text('{"version": 1, "topics": [{"name": "plain", '
                                      '"id": "7d9c7e0e-1f3b-4d35-9d0c-2f4c1b0e9a12", "partitions": 1, "configs": {}}]}')
    with BrokerProcess(data) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "plain" in admin.list_topics(timeout=10).topics
        admin.create_topics([NewTopic("fresh", 1, 1)])["fresh"].result(10)
    # its topics moved into the metadata log; the file is kept, renamed, and not read again
    assert not (data / "topics.json").exists() and (data / "topics.json.migrated").exists()
    with BrokerProcess(data) as broker:
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
        assert {"plain", "fresh"} <= set(topics)
