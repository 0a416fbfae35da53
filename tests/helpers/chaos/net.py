"""Hosts in network namespaces joined by a bridge, so the chaos suite's faults are real network faults.

Layout (one /24 per run, ``10.251.S.0/24``)::

    root ns (the test process)  --veth .254--+
    ns <tag>h1 (broker 1, .1)   --veth ------+
    ns <tag>h2 (broker 2, .2)   --veth ------+-- br0 in ns <tag>br
    ns <tag>h3 (broker 3, .3)   --veth ------+
    ns <tag>cl (clients, .100)  --veth ------+

The root namespace's link is the *admin* link: the harness uses it to watch brokers become ready and to
probe recovery, and every fault leaves it alone (each host accepts the admin address before its CHAOS
chain). Faults are rules in the CHAOS chain of a host's INPUT (partitions, one-way drops, packet loss
with ``statistic``) and a ``tbf`` qdisc on a host's eth0 (slow links; this kernel has no netem).
Healing flushes the chain and removes the qdisc.

Namespaces outlive a crashed test run, so every run records its pid under ``/run/ketch-chaos`` and the
next run removes what dead runs left behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

STATE_DIR = Path("/run/ketch-chaos")
CLIENT = "cl"
ADMIN_HOST = 254
CLIENT_HOST = 100


class NetError(RuntimeError):
    """A command that sets up or changes the network failed."""


def _run(*cmd: str, check: bool = True) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise NetError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def available() -> str | None:
    """Why namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "the chaos suite needs root (ip netns, iptables)"
    for tool in ("ip", "iptables", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 iptables)"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> set[str]:
    return {line.split()[0] for line in _run("ip", "netns", "list", check=False).splitlines() if line.strip()}


def sweep_leftovers() -> None:
    """Remove the namespaces of runs whose process is gone (a SIGKILLed pytest leaves them behind)."""
    if not STATE_DIR.exists():
        return
    for f in STATE_DIR.glob("*.pid"):
        try:
            pid = int(f.read_text().split()[0])
        except (ValueError, IndexError, OSError):
            pid = -1
        if pid > 0 and _alive(pid):
            continue
        _delete_namespaces(f.stem)
        f.unlink(missing_ok=True)


def _kill_namespace_processes(ns: str) -> None:
    for pid in _run("ip", "netns", "pids", ns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)


def _delete_namespaces(tag: str) -> None:
    for ns in sorted(_namespaces()):
        if ns.startswith(f"{tag}h") or ns in (f"{tag}br", f"{tag}{CLIENT}"):
            _kill_namespace_processes(ns)
            _run("ip", "netns", "del", ns, check=False)
    _run("ip", "link", "del", f"{tag}m", check=False)


class Net:
    """The namespaces of one run. ``hosts`` names the broker hosts (node ids); the client host is
    always there. Use as a context manager: leaving it kills whatever still runs inside and deletes
    every namespace."""

    def __init__(self, hosts: Sequence[int]) -> None:
        self.hosts = list(hosts)
        self.subnet_octet = self._free_octet()
        self.tag = f"kc{self.subnet_octet}"
        self._up = False

    # ---- addressing ----------------------------------------------------------------------------
    def ip(self, host: int | str) -> str:
        last = CLIENT_HOST if host == CLIENT else ADMIN_HOST if host == "admin" else int(host)
        return f"10.251.{self.subnet_octet}.{last}"

    def ns(self, host: int | str) -> str:
        return f"{self.tag}{CLIENT}" if host == CLIENT else f"{self.tag}h{host}"

    def exec_prefix(self, host: int | str) -> list[str]:
        """Prefix that runs a command inside `host`'s namespace (it execs, so the pid is the command's)."""
        return ["ip", "netns", "exec", self.ns(host)]

    @staticmethod
    def _free_octet() -> int:
        used = {ipaddress.ip_interface(w).network for line in _run("ip", "-o", "-4", "addr").splitlines()
                for w in line.split() if "/" in w and w[0].isdigit()}
        taken = {p.stem for p in STATE_DIR.glob("*.pid")} if STATE_DIR.exists() else set()
        start = os.getpid() % 250
        for i in range(250):
            octet = (start + i) % 250 + 1
            net = ipaddress.ip_network(f"10.251.{octet}.0/24")
            if net not in used and f"kc{octet}" not in taken:
                return octet
        raise NetError("no free 10.251.x.0/24 for the chaos network")

    # ---- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Net:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def setup(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        sweep_leftovers()
        (STATE_DIR / f"{self.tag}.pid").write_text(f"{os.getpid()}\n")
        self._up = True
        br = f"{self.tag}br"
        _run("ip", "netns", "add", br)
        _run("ip", "-n", br, "link", "set", "lo", "up")
        _run("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", br, "link", "set", "br0", "up")
        for host in [*self.hosts, CLIENT]:
            ns, a, b = self.ns(host), f"{self.tag}{host}a", f"{self.tag}{host}b"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _run("ip", "link", "set", a, "netns", ns)
            _run("ip", "-n", ns, "link", "set", a, "name", "eth0")
            _run("ip", "-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "link", "set", b, "netns", br)
            _run("ip", "-n", br, "link", "set", b, "master", "br0", "up")
            self._iptables(host, "-N", "CHAOS")
            self._iptables(host, "-A", "INPUT", "-s", self.ip("admin"), "-j", "ACCEPT")
            self._iptables(host, "-A", "INPUT", "-j", "CHAOS")
        adm_a, adm_b = f"{self.tag}m", f"{self.tag}mb"
        _run("ip", "link", "add", adm_a, "type", "veth", "peer", "name", adm_b)
        _run("ip", "addr", "add", f"{self.ip('admin')}/24", "dev", adm_a)
        _run("ip", "link", "set", adm_a, "up")
        _run("ip", "link", "set", adm_b, "netns", br)
        _run("ip", "-n", br, "link", "set", adm_b, "master", "br0", "up")

    def teardown(self) -> None:
        if not self._up:
            return
        self._up = False
        _delete_namespaces(self.tag)
        (STATE_DIR / f"{self.tag}.pid").unlink(missing_ok=True)

    # ---- faults --------------------------------------------------------------------------------
    def _iptables(self, host: int | str, *args: str) -> None:
        _run("ip", "netns", "exec", self.ns(host), "iptables", "-w", *args)

    def drop(self, at: int | str, sources: Iterable[int | str]) -> None:
        """`at` silently drops every packet from `sources` (a one-way fault: `at` can still send)."""
        for src in sources:
            self._iptables(at, "-A", "CHAOS", "-s", self.ip(src), "-j", "DROP")

    def partition(self, *sides: Iterable[int | str]) -> None:
        """No packet crosses between the given sides; hosts not named keep talking to everyone."""
        groups = [list(s) for s in sides]
        for i, side in enumerate(groups):
            others = [h for j, g in enumerate(groups) if j != i for h in g]
            for host in side:
                self.drop(host, others)

    def lose(self, at: int | str, probability: float) -> None:
        """`at` drops that fraction of everything it receives (the admin link excepted)."""
        self._iptables(at, "-A", "CHAOS", "-m", "statistic", "--mode", "random",
                       "--probability", f"{probability:.3f}", "-j", "DROP")

    def slow(self, at: int | str, rate_kbit: int) -> None:
        """Everything `at` sends goes through a token bucket of `rate_kbit`: a slow, queueing link
        (queued packets wait up to a second, which is the only delay this kernel can add)."""
        _run("ip", "netns", "exec", self.ns(at), "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
             "rate", f"{rate_kbit}kbit", "burst", "16kb", "latency", "1000ms")

    def heal(self) -> None:
        """Every host talks to every host again at full speed."""
        for host in [*self.hosts, CLIENT]:
            self._iptables(host, "-F", "CHAOS")
            _run("ip", "netns", "exec", self.ns(host), "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
