"""`ketch cluster up -n 3`: three local brokers forming one quorum, their logs prefixed, all of
them stopped by one Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from helpers import REPO_ROOT, wait_until
from helpers.broker import free_port_run
from test_quorum import _cluster_describe, _describe_cluster


def test_cluster_up_starts_three_brokers_in_one_quorum_and_stops_them(tmp_path: Path) -> None:
    base = free_port_run((0, 1, 2, 100, 101, 102))  # clients at base + i - 1, quorum at base + 100 + i - 1
    proc = subprocess.Popen([sys.executable, "-m", "broker", "cluster", "up", "-n", "3", "--base-port", str(base),
                             "--data-dir", str(tmp_path / "cluster")], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: any("bootstrap" in line for line in lines), timeout=30, message="the bootstrap line")
        assert f"127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}" in next(
            line for line in lines if "bootstrap" in line)

        def three_live() -> bool:
            try:
                return _describe_cluster(base) == {1: False, 2: False, 3: False}
            except OSError:
                return False

        wait_until(three_live, timeout=30, message="three registered brokers")
        d = _cluster_describe(f"127.0.0.1:{base + 1}")
        assert sorted(v["node"] for v in d["voters"]) == [1, 2, 3] and d["leader"] in (1, 2, 3)
        assert any(line.startswith("[node 2] ") for line in lines)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        reader.join(10)
        assert any("ketch cluster: stopped" in line for line in lines)
        # Every broker was started in the session group of `cluster up`: none of them outlives it. (A
        # connect to the old ports cannot tell, another process on the machine may take them.)
        try:
            os.killpg(proc.pid, 0)
            raise AssertionError("a process of `ketch cluster up` still runs after it stopped")
        except ProcessLookupError:
            pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_cluster_up_secure_serves_only_sasl_ssl(tmp_path: Path) -> None:
    """`--secure` (issue 27): certificates and logins made for the run; every broker reachable over
    SASL_SSL with the administrator's client.properties (a SCRAM user created and listed with
    it), and the same port refuses a client in the clear."""
    base = free_port_run((0, 1, 2, 100, 101, 102, 200, 201, 202))
    data = tmp_path / "cluster"
    proc = subprocess.Popen([sys.executable, "-m", "broker", "cluster", "up", "-n", "3", "--base-port", str(base),
                             "--data-dir", str(data), "--secure"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    props = data / "secure" / "client.properties"

    def ketch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "broker", *args, "--bootstrap", f"127.0.0.1:{base + 1}",
                               "--command-config", str(props), "--timeout", "10"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)

    try:
        wait_until(lambda: any("secured (SASL_SSL)" in line for line in lines), timeout=30,
                   message="the secured line")
        # registration and heartbeats over the SASL_SSL controller listeners: three live brokers
        wait_until(lambda: (r := ketch("cluster", "describe", "--json")).returncode == 0 and
                   sorted(v["node"] for v in json.loads(r.stdout)[0]["voters"]) == [1, 2, 3],
                   timeout=60, message=lambda: f"a described quorum\n{''.join(lines[-20:])}")
        assert ketch("user", "scram", "set", "app", "--password", "app-secret").returncode == 0
        listed = ketch("user", "scram", "list", "--json")
        assert json.loads(listed.stdout) == [{"user": "app", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
        plain = subprocess.run([sys.executable, "-m", "broker", "topic", "list", "--bootstrap", f"127.0.0.1:{base}",
                                "--timeout", "3"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert plain.returncode != 0  # a PLAINTEXT client gets nothing from a SASL_SSL port
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
