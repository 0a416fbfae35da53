"""A fuzzing campaign against a real broker process (docs/security.md "Front-door limits and fuzzing").

Before: a valid idempotent producer writes records to a topic the fuzzer never names. During:
workers send batches of seeded malformed frames (frames.py) on fresh connections to the client
and inter-broker listeners (and the controller listener when asked), each batch followed by a
valid ApiVersions whose answer says the broker read everything before it; a probe on its own
connection asks ApiVersions and Metadata every few seconds and must be answered within a deadline
(else: a hang), the process must be alive (else: a crash), its RSS is read from /proc. After: the
broker is SIGKILLed and restarted, and a consumer must read back exactly what was written before.
Handlers that raised (logged "handler failed") are bugs too, reported by API and exception.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from client import Producer

from ..broker import BrokerProcess, free_port
from ..consume import read_values
from .frames import Frame, Generator

CHECKED_TOPIC = "fuzz-checked"
SENTINEL = struct.pack(">hhi", 18, 0, 0x7FFFFFF0) + struct.pack(">h", 4) + b"fuzz"  # ApiVersions v0


@dataclass
class Report:
    seed: int
    frames_target: int
    listeners: list[str]
    frames_sent: int = 0
    batches: int = 0
    batches_fully_answered: int = 0  # the sentinel's answer came back: every frame was read
    batches_closed_by_broker: int = 0  # the broker closed the connection on a frame it refused
    batches_parked: int = 0  # still waiting at the batch deadline (a long poll): closed by us
    batches_desynced: int = 0  # ended on a frame whose size lies: closed by us after a moment
    parked_apis: Counter[str] = field(default_factory=Counter)
    by_mutation: Counter[str] = field(default_factory=Counter)
    probes: int = 0
    crashes: int = 0
    hangs: int = 0
    rss_start_kib: int = 0
    rss_max_kib: int = 0
    seconds: float = 0.0
    records_checked: int = 0
    recovered: bool = False
    handler_failures: Counter[str] = field(default_factory=Counter)
    loop_stalls: int = 0  # the broker's event loop did not turn for a second or more (its log)
    longest_stall_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return (not self.crashes and not self.hangs and self.recovered and not self.handler_failures
                and not self.failures)

    def summary(self) -> str:
        d = asdict(self)
        d["by_mutation"] = dict(self.by_mutation.most_common())
        d["handler_failures"] = dict(self.handler_failures.most_common())
        d["parked_apis"] = dict(self.parked_apis.most_common(12))
        return json.dumps(d, indent=2)


async def _batch(port: int, frames: list[Frame], deadline_s: float) -> str:
    """Send `frames` (and the sentinel unless the last one desyncs the stream) on a new connection;
    'answered', 'closed' (by the broker) or 'parked'."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), deadline_s)
    except (OSError, TimeoutError):
        return "refused"
    desync = frames[-1].desyncs
    try:
        writer.write(b"".join(f.data for f in frames) + (b"" if desync else struct.pack(">i", len(SENTINEL)) + SENTINEL))
        end = time.monotonic() + (0.2 if desync else deadline_s)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return "parked"
            head = await asyncio.wait_for(reader.readexactly(4), left)
            size = struct.unpack(">i", head)[0]
            body = await asyncio.wait_for(reader.readexactly(size), max(0.01, end - time.monotonic()))
            if body[:4] == SENTINEL[4:8]:
                return "answered"
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed"
    except TimeoutError:
        return "parked"
    finally:
        writer.close()


async def _probe(port: int, deadline_s: float) -> None:
    """ApiVersions v3 and Metadata v12 for the checked topic, answered within the deadline."""
    from protocol.framing import encode_request  # noqa: PLC0415
    from protocol.messages.api_versions import ApiVersionsRequest  # noqa: PLC0415
    from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic  # noqa: PLC0415

    async def ask() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(encode_request(ApiVersionsRequest(client_software_name="probe",
                                                           client_software_version="1"), 3, 1, "probe")
                         + encode_request(MetadataRequest(topics=[MetadataRequestTopic(name=CHECKED_TOPIC)],
                                                          allow_auto_topic_creation=False), 12, 2, "probe"))
            for corr in (1, 2):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                body = await reader.readexactly(size)
                assert struct.unpack(">i", body[:4])[0] == corr
        finally:
            writer.close()

    await asyncio.wait_for(ask(), deadline_s)


async def _produce_checked(bootstrap: str, n: int) -> list[bytes]:
    values = [f"checked-{i:07d}".encode() for i in range(n)]
    async with Producer(bootstrap, acks="all", enable_idempotence=True) as p:
        futs = [await p.send(CHECKED_TOPIC, v) for v in values]
        await p.flush()
        for fut in futs:
            await fut
    return values


async def _fuzz(b: BrokerProcess, ports: dict[str, int], report: Report, workers: int, batch_deadline_s: float,
                probe_every_s: float, probe_deadline_s: float, progress: bool) -> None:
    gens = {name: Generator(report.seed + i, name) for i, name in enumerate(ports)}
    names = list(ports)
    stop = asyncio.Event()
    started = time.monotonic()

    def next_batch(i: int) -> tuple[str, list[Frame]] | None:
        if report.frames_sent >= report.frames_target or stop.is_set():
            return None
        name = names[(report.batches + i) % len(names)]
        g = gens[name]
        n = g.rnd.randrange(1, 33)
        out: list[Frame] = []
        for _ in range(min(n, report.frames_target - report.frames_sent)):
            f = g.frame()
            out.append(f)
            report.by_mutation[f.mutation] += 1
            if f.desyncs or f.fatal:
                break  # the broker reads no further: a frame after it would never be read
        report.frames_sent += len(out)
        report.batches += 1
        return name, out

    async def worker(i: int) -> None:
        while (nb := next_batch(i)) is not None:
            name, frames = nb
            outcome = await _batch(ports[name], frames, batch_deadline_s)
            if outcome == "answered":
                report.batches_fully_answered += 1
            elif outcome == "closed":
                report.batches_closed_by_broker += 1
            elif outcome == "parked" and frames[-1].desyncs:
                report.batches_desynced += 1
            elif outcome == "parked":
                report.batches_parked += 1
                report.parked_apis.update(f"{f.api_key}v{f.version}" for f in frames if not f.fatal)
            else:
                report.failures.append(f"connection to the {name} listener refused")
                stop.set()

    async def watch() -> None:
        last = 0
        while not stop.is_set():
            await asyncio.sleep(probe_every_s)
            if not b.is_running():
                report.crashes += 1
                report.failures.append(f"broker died after {report.frames_sent} frames\n{b.log_tail(80)}")
                stop.set()
                return
            report.rss_max_kib = max(report.rss_max_kib, b.rss_kib())
            try:
                await _probe(ports["client"], probe_deadline_s)
                report.probes += 1
            except (TimeoutError, OSError, asyncio.IncompleteReadError, AssertionError) as e:
                report.hangs += 1
                report.failures.append(f"probe not answered in {probe_deadline_s}s after {report.frames_sent} "
                                       f"frames: {e!r}")
                stop.set()
                return
            if progress and report.frames_sent - last >= 50_000:
                last = report.frames_sent
                rate = report.frames_sent / (time.monotonic() - started)
                print(f"  {report.frames_sent:>9,} frames  {rate:,.0f}/s  rss {report.rss_max_kib / 1024:.0f} MiB",
                      flush=True)

    watcher = asyncio.get_running_loop().create_task(watch())
    await asyncio.gather(*(worker(i) for i in range(workers)))
    stop.set()
    await watcher
    if not b.is_running():
        report.crashes += 1
    elif not report.failures:
        report.rss_max_kib = max(report.rss_max_kib, b.rss_kib())
        try:
            await _probe(ports["client"], probe_deadline_s)  # the last batches did not hang it either
        except (TimeoutError, OSError, asyncio.IncompleteReadError, AssertionError) as e:
            report.hangs += 1
            report.failures.append(f"final probe not answered in {probe_deadline_s}s: {e!r}")


_STALL = re.compile(r"event loop stalled\s+seconds=([\d.]+)")
_HANDLER_FAILED = re.compile(r"handler failed.*?api=(\S+).*?api_version=(\d+)")


def _handler_failures(log: str) -> Counter[str]:
    """'Api vN: ExceptionType' for every handler that raised, from the broker's log."""
    out: Counter[str] = Counter()
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _HANDLER_FAILED.search(line)
        if not m:
            continue
        exc = next((ln.strip() for ln in lines[i + 1:i + 60] if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", ln.strip())),
                   "?")
        out[f"{m.group(1)} v{m.group(2)}: {exc[:160]}"] += 1
    return out


def run(workdir: Path, frames: int, seed: int, *, listeners: tuple[str, ...] = ("client", "broker"),
        workers: int = 16, records: int = 2000, batch_deadline_s: float = 2.0, probe_every_s: float = 2.0,
        probe_deadline_s: float = 15.0, progress: bool = False) -> Report:
    """The whole campaign on a fresh broker in `workdir`; the broker is stopped at the end."""
    report = Report(seed, frames, list(listeners))
    env = {"KETCH_LOG_FORMAT": "console"}
    if "controller" in listeners:
        env["KETCH_CONTROLLER_LISTEN"] = f"127.0.0.1:{free_port()}"
    b = BrokerProcess(workdir / "data", env=env, log_path=workdir / "broker.log")
    try:
        b.start()
        ports = {"client": b.port, "broker": b.inter_broker_port}
        if "controller" in listeners:
            ports["controller"] = int(env["KETCH_CONTROLLER_LISTEN"].rsplit(":", 1)[1])
        ports = {k: v for k, v in ports.items() if k in listeners or k == "client"}
        written = asyncio.run(_produce_checked(b.bootstrap, records))
        report.rss_start_kib = report.rss_max_kib = b.rss_kib()
        t0 = time.monotonic()
        asyncio.run(_fuzz(b, ports, report, workers, batch_deadline_s, probe_every_s, probe_deadline_s, progress))
        report.seconds = round(time.monotonic() - t0, 1)
        log = b.log_text()
        report.handler_failures = _handler_failures(log)
        stalls = [float(x) for x in _STALL.findall(log)]
        report.loop_stalls, report.longest_stall_s = len(stalls), max(stalls, default=0.0)
        if b.is_running() and not report.hangs:
            b.kill()
            b.start(timeout=120)
            got = asyncio.run(read_values(b.bootstrap, CHECKED_TOPIC, 1))
            report.records_checked = len(got)
            report.recovered = got == written
            if not report.recovered:
                report.failures.append(f"after SIGKILL and restart the checked topic reads {len(got)} records, "
                                       f"{records} were written")
    finally:
        b.kill()  # a stuck broker must not cost the report (stop() raises when SIGTERM is not enough)
        b.close()
    return report


def default_workers() -> int:
    return int(os.environ.get("FUZZ_WORKERS", "16"))
