"""The multi-broker harness itself: separate processes, node ids, kill/pause/restart by node id,
and no process left behind when a test fails. Cluster tests rely on each of these."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import REPO_ROOT, Cluster, make_messages, port_accepts, unique_topic
from helpers.confluent import consume_all, create_topic, produce
from helpers.raw import Raw

from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest


def _node_id(port: int) -> int:
    c = Raw(port)
    try:
        resp = c.request(MetadataRequest(topics=[]), 9)
    finally:
        c.close()
    assert resp is not None
    return resp.controller_id if not resp.brokers else resp.brokers[0].node_id


def _answers(port: int, timeout: float) -> bool:
    """True if the broker answers ApiVersions within `timeout` (a paused one accepts the TCP
    connection — the kernel does that — but never replies)."""
    c = Raw(port)
    c.sock.settimeout(timeout)
    try:
        return c.request(ApiVersionsRequest(), 0) is not None
    except TimeoutError:
        return False
    finally:
        c.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); its /proc state says it is gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_brokers_are_separate_processes_with_their_own_ids_ports_and_dirs(cluster_factory) -> None:
    c: Cluster = cluster_factory(3)
    assert len({b.pid for b in c}) == 3
    assert len({b.port for b in c}) == 3
    assert len({b.data_dir for b in c}) == 3
    assert {n: _node_id(c[n].port) for n in c.node_ids} == {1: 1, 2: 2, 3: 3}
    assert c.bootstrap.count(",") == 2


def test_pause_freezes_one_broker_and_resume_brings_it_back(cluster_factory) -> None:
    c: Cluster = cluster_factory(3)
    c.pause(2)
    assert not _answers(c[2].port, timeout=1.0)
    assert _answers(c[1].port, timeout=5.0) and _answers(c[3].port, timeout=5.0)
    assert c.running() == [1, 3]
    c.resume(2)
    c.wait_until(lambda: _answers(c[2].port, timeout=1.0), timeout=15, message="broker 2 to answer again")


def test_sigkill_and_restart_keeps_the_port_and_the_data(cluster_factory) -> None:
    c: Cluster = cluster_factory(2)
    topic = unique_topic("harness")
    b = c[2]
    create_topic(b.bootstrap, topic, 1)
    msgs = make_messages(50, seed=7)
    produce(b.bootstrap, topic, msgs)
    old_pid = b.pid
    c.kill(2)
    assert not port_accepts(b.host, b.port)
    c.restart(2)
    assert b.pid != old_pid
    got = consume_all(b.bootstrap, topic, 1)
    assert [m.value for m in got] == [m.value for m in msgs]


def test_a_failing_test_leaves_no_broker_running(tmp_path: Path) -> None:
    """Run a test that starts a cluster, pauses a broker and then fails; after pytest exits every
    broker pid it started is gone and the failure report carries the brokers' logs."""
    pids_file = tmp_path / "pids"
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(textwrap.dedent(f"""
        from pathlib import Path

        def test_fails(cluster_factory):
            c = cluster_factory(3)
            c.pause(3)
            Path({str(pids_file)!r}).write_text(" ".join(str(b.pid) for b in c))
            assert False, "deliberate failure"
    """))
    conftest = REPO_ROOT / "tests" / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'tests'}"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "deliberate failure" in proc.stdout
    assert "ketch broker" in proc.stdout  # log tails attached to the report
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3
    assert [p for p in pids if _alive(p)] == []
