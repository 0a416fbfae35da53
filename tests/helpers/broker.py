"""Run a real Ketch broker as a subprocess: start, wait until ready, stop, SIGKILL, restart.

Tests never talk to a mocked broker. Everything goes through :class:`BrokerProcess`, which owns one
subprocess at a time on a fixed port and data directory, so that a restart comes back at the same
address with the same on-disk state.
"""

from __future__ import annotations

import atexit
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from .wait import WaitTimeout, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


# Test ports come from below the kernel's ephemeral range (32768-60999 on Linux): a port taken
# there by bind(0) and released can be handed to any outgoing connection (a broker's own fetcher,
# a client) before the broker binds it, or while a killed broker is down. CI lost a cluster test
# to exactly that ("address already in use"). Ports below the range are only ever taken by bind.
_TEST_PORTS = (20000, 32000)


def _port_range() -> tuple[int, int]:
    """This process's share of the test ports. Under pytest-xdist each worker draws from a slice
    of its own: a port one worker has handed out but that nothing listens on yet (a broker still
    starting, or down between a SIGKILL and its restart) is bindable, so another worker drawing
    from the same ports could take it, and its broker would answer the first worker's cluster."""
    lo, hi = _TEST_PORTS
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...; unset when serial
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return lo, hi
    size = (hi - lo) // count
    index = int(worker[2:])
    return lo + index * size, lo + (index + 1) * size


_PORT_RANGE = _port_range()
_handed_out: set[int] = set()
_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_run(offsets: Sequence[int] = (0,), host: str = HOST) -> int:
    """A base port such that base + o is free for every o in `offsets`, all of them handed out: for
    a command that derives its ports from one base (`ketch cluster up --base-port`). Outside the
    ephemeral range, in this process's share, never one handed out before in this process (so a
    stopped broker's port is not given to another while it is down)."""
    lo, hi = _PORT_RANGE
    top = hi - max(offsets)
    # random bases first (a fresh process does not retry the ports a previous run just used), then
    # every base in order, so a share that is mostly handed out still yields one when one is left
    for base in itertools.chain((_rng.randrange(lo, top) for _ in range(200)), range(lo, top)):
        ports = [base + o for o in offsets]
        if not _handed_out.intersection(ports) and all(_bindable(host, p) for p in ports):
            _handed_out.update(ports)
            return base
    raise OSError(f"no free ports {list(offsets)} from a base in {_PORT_RANGE} on {host}")


def free_port(host: str = HOST) -> int:
    """A TCP port outside the ephemeral range, in this process's share of the test ports, bindable
    now and not handed out before in this process."""
    return free_port_run((0,), host)


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class BrokerError(AssertionError):
    """The broker process misbehaved (did not start, died, did not stop). Carries its log tail."""


class BrokerProcess:
    """One Ketch broker subprocess bound to a port and a data directory that outlive restarts.

    ``env`` entries are passed as environment variables on top of the current environment (use the
    ``KETCH_<SETTING>`` names, e.g. ``{"KETCH_FLUSH_MESSAGES": "1"}``). Combined stdout and stderr of
    every incarnation is appended to ``log_path``, with a marker line per start.
    """

    # Every instance that has been started and not yet closed; conftest attaches their log tails to
    # the report of a failing test.
    live: ClassVar[list[BrokerProcess]] = []

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        host: str = HOST,
        env: Mapping[str, str] | None = None,
        config: Path | str | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | str | None = None,
        python: str = sys.executable,
        inter_broker_port: int | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.env = dict(env or {})
        # A fixed inter-broker port (not the broker's default "any free port"), so tests can reach
        # what only that listener serves (WriteTxnMarkers) and it survives restarts.
        self.inter_broker_port = inter_broker_port if inter_broker_port is not None else free_port(host)
        self.env.setdefault("KETCH_INTER_BROKER_LISTEN", f"{host}:{self.inter_broker_port}")
        self.config = Path(config) if config is not None else None
        self.extra_args = list(extra_args)
        self.log_path = (
            Path(log_path) if log_path is not None else self.data_dir.parent / (f"broker-{self.port}.log")
        )
        self.python = python
        self.prefix = list(prefix)  # e.g. `ip netns exec NS`: it execs, so the pid stays the broker's
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0
        self._log_file = None

    # ------------------------------------------------------------------ properties
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def inter_broker_bootstrap(self) -> str:
        return self.env["KETCH_INTER_BROKER_LISTEN"]

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise BrokerError("broker is not running")
        return self.proc.pid

    def command(self) -> list[str]:
        cmd = [
            *self.prefix,
            self.python,
            "-m",
            "broker",
            "broker",
            "--listen",
            self.bootstrap,
            "--advertise",
            self.bootstrap,
            "--data-dir",
            str(self.data_dir),
        ]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        return cmd + self.extra_args

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died_unexpectedly(self) -> bool:
        """True if the process exited on its own (not through stop/kill/restart)."""
        return self.proc is not None and self._log_file is not None and self.proc.poll() is not None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 30.0, *, wait: bool = True) -> BrokerProcess:
        """Start the broker and (unless `wait` is false) wait until its port accepts TCP
        connections."""
        if self.is_running():
            raise BrokerError(f"broker on {self.bootstrap} is already running (pid {self.pid})")
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        self.starts += 1
        self._log_file.write(
            f"===== ketch start #{self.starts} at {time.strftime('%H:%M:%S')}: {' '.join(self.command())}"
            f" env={self.env} =====\n".encode()
        )
        self._log_file.flush()
        self.proc = subprocess.Popen(
            self.command(),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C on pytest must not hit the broker before teardown does
        )
        if self not in BrokerProcess.live:
            BrokerProcess.live.append(self)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if not self.is_running():
                rc = self._reap()
                raise BrokerError(
                    f"broker exited with code {rc} before accepting connections on {self.bootstrap}\n"
                    f"{self.log_tail()}"
                )
            return port_accepts(self.host, self.port)

        try:
            wait_until(ready, timeout=timeout, interval=0.05, message=f"broker to listen on {self.bootstrap}")
        except WaitTimeout as exc:
            self.kill()
            raise BrokerError(f"{exc}\n{self.log_tail()}") from None

    def stop(self, timeout: float = 20.0) -> int:
        """Graceful stop: SIGTERM, then wait. Raises BrokerError (after SIGKILL) if it does not exit."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stacks = _stacks(self.pid)
                self.kill()
                raise BrokerError(
                    f"broker pid {self.pid} did not exit within {timeout}s of SIGTERM\n{stacks}{self.log_tail()}"
                ) from None
        return self._reap()

    def kill(self) -> int:
        """Crash: SIGKILL the broker's whole process group (a worker it started dies with it) and
        reap. Nothing the broker has not already written to disk survives."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self.paused = False
        return self._reap()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets open but answers nothing, like a broker stuck
        in a long GC pause or on a dead disk: peers see timeouts, not refused connections."""
        if not self.is_running():
            raise BrokerError(f"cannot pause {self!r}: not running")
        self._signal_group(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.is_running():
            self._signal_group(signal.SIGCONT)
        self.paused = False

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)  # start_new_session made the broker its group's leader
        except ProcessLookupError:
            pass

    def restart(self, *, kill: bool = False, timeout: float = 30.0) -> BrokerProcess:
        """Stop (or SIGKILL) and start again on the same port and data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop if still running (SIGTERM, falling back to SIGKILL) and forget the instance."""
        try:
            if self.paused:
                self.resume()  # a stopped process would hold SIGTERM until the stop timeout
            if self.is_running():
                self.stop()
        finally:
            self.kill()
            if self in BrokerProcess.live:
                BrokerProcess.live.remove(self)

    def _reap(self) -> int:
        assert self.proc is not None
        rc = self.proc.returncode
        if self._log_file is not None:
            self._log_file.write(f"===== ketch pid {self.proc.pid} exited with {rc} =====\n".encode())
            self._log_file.close()
            self._log_file = None
        return rc

    # ------------------------------------------------------------------ diagnostics
    def log_text(self) -> str:
        if self._log_file is not None:
            self._log_file.flush()
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log_path} ---\n" + "\n".join(text)

    def rss_kib(self) -> int:
        """Resident set size of the broker process, from /proc/PID/status (VmRSS, in KiB)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise BrokerError(f"no VmRSS in /proc/{self.pid}/status")

    def __enter__(self) -> BrokerProcess:
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.proc.pid}" if self.is_running() and self.proc else "stopped"
        return f"<BrokerProcess {self.bootstrap} {state} data={self.data_dir}>"


def _stacks(pid: int) -> str:
    """Every thread's Python stack in a broker that will not stop (py-spy, from the bench extra),
    for the report; empty when py-spy is not there or cannot attach."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        return ""
    try:
        out = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return f"--- py-spy dump of pid {pid} ---\n{out.stdout}{out.stderr}\n"


@atexit.register
def _kill_leftovers() -> None:
    """Last line against leaks: whatever a fixture's teardown did not reach (pytest interrupted,
    a helper used outside a fixture) is SIGKILLed when the test process exits."""
    for b in list(BrokerProcess.live):
        if b.is_running():
            b.kill()
