"""What a benchmark runs against: librdkafka's mock cluster and Ketch broker subprocesses.

Kept apart from the scenarios so that bench/cluster.py can build on :class:`Target` and
:class:`KetchBroker` while bench/throughput.py chooses among all targets without a circular import.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
QUIET = {"log_level": 3}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Target:
    name: str
    bootstrap: str
    partitions: int

    def prepare_topic(self, topic: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def log_tail(self, n: int = 40) -> str:
        """What a failure report shows of the target's own output (nothing for the in-process mock)."""
        return ""

    def replication_report(self) -> dict[str, Any]:
        """Facts about the last prepared topic that qualify its figures (a cluster's ISR after the
        run says whether acks=all still waited for every replica); empty for a single broker."""
        return {}

    def broker_pids(self) -> list[int]:
        """The broker processes, whose CPU time a benchmark may count (none: the mock runs in the
        benchmark's own process)."""
        return []


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """`n` bytes from a blocking socket (a raw Kafka frame's size, then its body)."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class MockCluster(Target):
    """librdkafka's in-process mock cluster.

    A client configured with ``test.mock.num.brokers`` starts a mock cluster inside itself and ignores
    ``bootstrap.servers``. The mock's brokers listen on real loopback ports, which that client's
    metadata reports: ``list_topics().brokers`` gives their host:port, usable by any other client as
    ``bootstrap.servers`` while the owning client lives. The mock does not implement CreateTopics;
    it auto-creates a topic on its first Metadata request, with 4 partitions (librdkafka's default).
    """

    name = "mock"

    def __init__(self) -> None:
        self._owner = Producer({"test.mock.num.brokers": 1, **QUIET})
        md = self._owner.list_topics(timeout=10)
        brokers = list(md.brokers.values())
        if not brokers:
            raise RuntimeError("mock cluster reported no brokers")
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
        self.partitions = 0

    def prepare_topic(self, topic: str) -> None:
        md = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET}).list_topics(topic=topic, timeout=10)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(f"mock auto-create of {topic} failed: {t.error}")
        self.partitions = len(t.partitions)

    def close(self) -> None:
        self._owner.flush(5)
        del self._owner  # destroying the owning client tears the mock cluster down


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KetchBroker(Target):
    """A Ketch broker subprocess with its data in a temporary directory, stopped with SIGTERM."""

    name = "ketch"

    def __init__(self, partitions: int, env: dict[str, str] | None = None, start_timeout: float = 60,
                 repo: Path = REPO_ROOT, log_dirs: int = 1) -> None:
        """`repo`: the checkout whose broker runs (another one than this, for a reference run);
        `log_dirs`: how many log directories it gets (log_dirs; all under one temporary directory,
        so on one disk)."""
        self.dir = Path(tempfile.mkdtemp(prefix="ketch-bench-"))
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.partitions = partitions
        self.env = dict(env or {})
        self.log_dirs = [self.dir / f"data-{i}" for i in range(log_dirs)] if log_dirs > 1 else []
        if self.log_dirs:
            self.name = f"ketch-{log_dirs}dirs"
            self.env["KETCH_LOG_DIRS"] = ",".join(str(d) for d in self.log_dirs)
        self.log_path = self.dir / "broker.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.repo = repo
        self.start(start_timeout)

    def start(self, start_timeout: float = 60) -> None:
        """Start the broker process on this target's port and data directory (again, after `stop`:
        a restart reads back what the last one left) and return once it accepts connections."""
        cmd = [
            sys.executable, "-m", "broker", "broker",
            "--listen", self.bootstrap, "--advertise", self.bootstrap, "--data-dir", str(self.dir / "data"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.repo,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(self.repo), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ketch exited with {self.proc.returncode} at start\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(
                        f"ketch did not listen within {start_timeout}s\n{self.log_tail()}"
                    ) from None
                time.sleep(0.05)  # polling interval of the readiness check

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        """Signal the broker and wait for it to exit, keeping its data directory for `start`."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})

    def create_topics(self, names: list[str], partitions: int, timeout: float = 120) -> None:
        client = self.admin()  # must outlive the futures: destroying it cancels the request
        futs = client.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names],
            request_timeout=timeout,
        )
        for f in futs.values():
            f.result(timeout)
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            md = self.admin().list_topics(timeout=30)
            pending = {
                n
                for n in pending
                if n not in md.topics
                or md.topics[n].error is not None
                or len(md.topics[n].partitions) != partitions
            }
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"topics not visible in metadata after {timeout}s: {sorted(pending)[:5]}")
            if pending:
                time.sleep(0.1)  # polling interval

    def prepare_topic(self, topic: str) -> None:
        self.create_topics([topic], self.partitions)

    def replication_report(self) -> dict[str, Any]:
        """With several log directories: which they are, whether they share a device (then they
        share a disk, and the figure says nothing of spreading I/O over disks), and how many
        partition directories each holds."""
        if not self.log_dirs:
            return {}
        return {"log_dirs": [str(d) for d in self.log_dirs],
                "log_dirs_same_device": len({os.stat(d).st_dev for d in self.log_dirs}) == 1,
                "partitions_per_log_dir": [sum(1 for p in d.iterdir() if p.is_dir() and not p.name.startswith("__"))
                                           for d in self.log_dirs]}

    def broker_pids(self) -> list[int]:
        return [self.proc.pid]

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def log_tail(self, n: int = 40) -> str:
        self._log.flush()
        lines = self.log_path.read_bytes().decode("utf-8", "replace").splitlines()[-n:]
        return "\n".join(lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                log("ketch ignored SIGTERM for 30s; killing it")
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

