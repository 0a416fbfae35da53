"""The container test behind `make compose-test` (tests/compose/compose-test.sh prepares Docker).

Builds the image and starts docker-compose.yml's three brokers for real, then judges them only
from the outside, as a user on the host would: health as Docker reports it, Kafka clients
(confluent-kafka and the bundled client) on the published ports, `docker kill` for a crash.
It is not a pytest module: it needs a Docker daemon and minutes, so `make test` never runs it.

COMPOSE_TEST_SECURE=1 (`make compose-test SECURE=1`) runs the same steps on the secured cluster
(docker-compose.secure.yml over docker-compose.yml, certificates and logins made for the run by
docker/secure-setup.py in a temporary directory): every client then speaks SASL_SSL, producers and
consumers as a SCRAM user holding only its ACLs, the admin client as the administrator, and the
refusals (a wrong password, a client in the clear, a topic without an ACL) are checked too.

Every wait has a deadline (helpers.wait); the cluster is torn down, volumes included, whatever
happens. The last line is a one-line summary; the exit status is 1 on any failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# This checkout's client and the shared test helpers, whatever checkout the virtualenv was installed from
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from helpers.wait import wait_until  # noqa: E402

import client  # noqa: E402
from client.admin_cli.support import security_from_file  # noqa: E402

PROJECT = os.environ.get("COMPOSE_TEST_PROJECT", "ketch-compose-test")
IMAGE = "ketch:local"  # docker-compose.yml's image
BOOTSTRAP = "localhost:19092,localhost:19093,localhost:19094"
SERVICES = {1: "ketch-1", 2: "ketch-2", 3: "ketch-3"}
QUIET = {"log_level": 2}  # librdkafka: a killed broker's refused connections are expected, not news
SECURE = os.environ.get("COMPOSE_TEST_SECURE", "") not in ("", "0")
COMPOSE_FILES = ("docker-compose.yml", *(("docker-compose.secure.yml",) if SECURE else ()))
# Who the host's clients are. In the clear: anonymous, all of them. Secured (secure_setup,
# scram_user_and_acls): producers and consumers the SCRAM user APP, which holds only the ACLs
# APP_ACLS grants; the admin client (topics, metadata, ISRs) the administrator, a super user.
CLIENT: dict[str, Any] = dict(QUIET)  # confluent-kafka producers and consumers
ADMIN: dict[str, Any] = dict(QUIET)  # confluent-kafka's AdminClient
BUNDLED: dict[str, client.Security | None] = {"client": None, "admin": None}  # the bundled client's
APP = "app"
APP_PREFIX = "compose-"  # the names of every topic, group and transactional id the steps use
LOG_FILE = Path(os.environ.get("COMPOSE_TEST_LOGS", "/tmp/ketch-compose-test.log"))
TOPIC_CONFIG = {"min.insync.replicas": "2"}


class Failed(Exception):
    """A check that did not hold; its message is the summary line's reason."""


def check(cond: object, what: str) -> None:
    if not cond:
        raise Failed(what)


# ---------------------------------------------------------------------------------------------
# Docker


def sh(*cmd: str, timeout: float = 900, stderr_too: bool = False) -> str:
    """Run a command; its output, or Failed with the tail of what it printed."""
    p = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, timeout=timeout)
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        raise Failed(f"`{' '.join(cmd)}` exited {p.returncode}:\n{tail}")
    return p.stdout + p.stderr if stderr_too else p.stdout


def compose(*args: str, timeout: float = 900) -> str:
    files = [a for f in COMPOSE_FILES for a in ("-f", str(ROOT / f))]
    return sh("docker", "compose", "-p", PROJECT, *files, *args, timeout=timeout)


def container(service: str) -> str:
    cid = compose("ps", "-a", "-q", service).strip()
    check(cid, f"no container for {service}")
    return cid


def health(cid: str) -> str:
    state = json.loads(sh("docker", "inspect", "-f", "{{json .State}}", cid))
    if not state.get("Running"):
        return "not running"
    return str(state.get("Health", {}).get("Status", "no healthcheck"))


def health_reason(cid: str) -> str:
    state = json.loads(sh("docker", "inspect", "-f", "{{json .State}}", cid))
    log = state.get("Health", {}).get("Log") or [{}]
    return str(log[-1].get("Output", "")).strip()


def quorum_leader() -> int:
    """The metadata quorum's leader (DescribeQuorum, the bundled client as the administrator)."""

    async def ask() -> int:
        async with client.Admin(BOOTSTRAP, security=BUNDLED["admin"]) as a:
            return int((await a.describe_quorum()).leader_id)

    return asyncio.run(ask())


def wait_healthy(cids: dict[int, str], timeout: float) -> None:
    wait_until(lambda: all(health(c) == "healthy" for c in cids.values()), timeout=timeout, interval=0.5,
               message=lambda: "healthy brokers: " + ", ".join(
                   f"{SERVICES[n]} {health(c)} ({health_reason(c)})" for n, c in cids.items()))


# ---------------------------------------------------------------------------------------------
# Kafka helpers (confluent-kafka)


def admin(bootstrap: str = BOOTSTRAP) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **ADMIN})


def known_partitions(topic: str, bootstrap: str = BOOTSTRAP) -> dict[int, Any]:
    """Partition id -> librdkafka's PartitionMetadata (leader, replicas, isrs) as the broker asked
    sees it; {} while that broker does not know the topic."""
    t = admin(bootstrap).list_topics(topic=topic, timeout=10).topics.get(topic)
    return {} if t is None or t.error is not None else dict(t.partitions)


def partitions(topic: str, count: int = 3) -> dict[int, Any]:
    """The topic's `count` partitions. Each call may ask another broker, and a broker applies a
    new topic a moment after the one that created it: one that does not know it yet is asked again."""
    return wait_until(lambda: ps if len(ps := known_partitions(topic)) == count else None, timeout=30,
                      interval=0.1, message=f"metadata of {topic} with {count} partitions")


def create_topic(name: str, count: int = 3) -> None:
    """Three replicas, min.insync.replicas 2; returns once every broker shows every partition with
    a leader and all three replicas in sync."""
    a = admin()
    a.create_topics([NewTopic(name, num_partitions=count, replication_factor=3, config=TOPIC_CONFIG)],
                    request_timeout=30)[name].result(60)
    for address in BOOTSTRAP.split(","):  # a client bootstrapped from one address asks that broker first
        wait_until(lambda a=address: len(ps := known_partitions(name, a)) == count and all(
            p.leader >= 0 and len(p.isrs) == 3 for p in ps.values()), timeout=60, interval=0.2,
            message=f"topic {name} at {address}: {count} partitions led, 3 in sync")


def read_committed(topic: str, timeout: float = 90) -> list[tuple[int, int, bytes]]:
    """Every record of `topic` up to the high watermarks as they are now, at read_committed."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"compose-reader-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", **CLIENT})
    try:
        parts = sorted(partitions(topic))
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout

        def done() -> bool:
            pos = c.position([TopicPartition(topic, p) for p in parts])
            return all(tp.offset >= ends[tp.partition] for tp in pos if ends[tp.partition] > 0)

        while not done():
            check(time.monotonic() < deadline, f"reading {topic} back to its high watermarks {ends} in {timeout}s")
            for m in c.consume(num_messages=1000, timeout=0.5):
                err = m.error()
                if err is None:
                    out.append((m.partition() or 0, m.offset() or 0, m.value() or b""))
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise Failed(f"reading {topic}: {err}")
        return out
    finally:
        c.close()


def group_poll(c: Consumer, want: int, timeout: float) -> list[bytes]:
    """Values from a subscribed consumer until `want` arrived (Failed at the deadline)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        check(time.monotonic() < deadline, f"group consumer got {len(got)} of {want} records in {timeout}s")
        for m in c.consume(num_messages=500, timeout=0.5):
            err = m.error()
            if err is None:
                got.append(m.value() or b"")
            elif err.code() != KafkaError._PARTITION_EOF:
                raise Failed(f"group consumer: {err}")
    return got


# ---------------------------------------------------------------------------------------------
# The steps


def txn_round_trip_confluent(topic: str) -> str:
    """Committed records reach a read_committed group once, aborted ones never; the group's
    committed offsets carry a second member on from where the first stopped."""
    create_topic(topic)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"compose-{uuid.uuid4()}", **CLIENT})
    p.init_transactions(60)

    def txn(prefix: str, n: int, commit: bool) -> list[bytes]:
        values = [f"{prefix}-{i}".encode() for i in range(n)]
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, key=str(i % 10).encode(), value=v)
        if commit:
            p.commit_transaction(60)
        else:
            p.flush(60)
            p.abort_transaction(60)
        return values

    committed = txn("commit", 300, True)
    aborted = txn("abort", 100, False)
    committed += txn("commit-again", 100, True)
    group = f"compose-group-{uuid.uuid4()}"
    conf = {"bootstrap.servers": BOOTSTRAP, "group.id": group, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **CLIENT}
    c = Consumer(conf)
    c.subscribe([topic])
    got = group_poll(c, len(committed), 90)
    c.commit(asynchronous=False)
    c.close()
    check(sorted(got) == sorted(committed), f"read_committed group: {len(got)} records, expected the "
          f"{len(committed)} committed ones once each")
    check(not set(got) & set(aborted), "an aborted record reached a read_committed consumer")
    later = txn("after-commit", 50, True)
    c = Consumer(conf)  # same group: starts at the offsets the first member committed
    c.subscribe([topic])
    got2 = group_poll(c, len(later), 90)
    extra = [m for m in c.consume(num_messages=100, timeout=2) if m.error() is None]
    c.close()
    check(sorted(got2) == sorted(later) and not extra,
          f"second group member: {len(got2) + len(extra)} records, expected only the {len(later)} new ones")
    return f"{len(committed) + len(later)} committed, {len(aborted)} aborted; group resumed at its commit"


async def txn_round_trip_bundled(topic: str) -> str:
    """The same round trip with the bundled asyncio client."""
    async with client.Admin(BOOTSTRAP, security=BUNDLED["client"]) as a:
        await a.create_topic(topic, num_partitions=3, replication_factor=3, config=TOPIC_CONFIG)
    for address in BOOTSTRAP.split(","):
        await asyncio.to_thread(wait_until, lambda a=address: len(ps := known_partitions(topic, a)) == 3 and all(
            x.leader >= 0 and len(x.isrs) == 3 for x in ps.values()), 60, 0.2, f"topic {topic} led and in sync at {address}")
    async with client.Producer(BOOTSTRAP, transactional_id=f"compose-bundled-{uuid.uuid4()}",
                               security=BUNDLED["client"]) as p:
        await p.init_transactions()

        async def txn(prefix: str, n: int, commit: bool) -> list[bytes]:
            values = [f"{prefix}-{i}".encode() for i in range(n)]
            await p.begin_transaction()
            for i, v in enumerate(values):
                await p.send(topic, v, key=str(i % 10).encode())
            if commit:
                await p.commit_transaction()
            else:
                await p.flush()
                await p.abort_transaction()
            return values

        committed = await txn("commit", 300, True)
        aborted = await txn("abort", 100, False)
        group = f"compose-bundled-group-{uuid.uuid4()}"

        async def member(want: int) -> list[bytes]:
            async with client.Consumer(BOOTSTRAP, group_id=group, isolation_level="read_committed",
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       security=BUNDLED["client"]) as c:
                c.subscribe([topic])
                got: list[bytes] = []
                deadline = time.monotonic() + 90
                while len(got) < want:
                    check(time.monotonic() < deadline, f"bundled group consumer got {len(got)} of {want} in 90s")
                    batches = await c.getmany(timeout_ms=500)
                    got += [r.value or b"" for rs in batches.values() for r in rs]
                more = await c.getmany(timeout_ms=2000)
                got += [r.value or b"" for rs in more.values() for r in rs]
                await c.commit()
                return got

        got = await member(len(committed))
        check(sorted(got) == sorted(committed), f"bundled read_committed group: {len(got)} records, expected "
              f"the {len(committed)} committed ones once each")
        check(not set(got) & set(aborted), "an aborted record reached the bundled read_committed consumer")
        later = await txn("after-commit", 50, True)
        got2 = await member(len(later))
        check(sorted(got2) == sorted(later),
              f"bundled second group member: {len(got2)} records, expected only the {len(later)} new ones")
    return f"{len(committed) + len(later)} committed, {len(aborted)} aborted; group resumed at its commit"


class AckLog:
    """What an acks=all idempotent producer was told: value -> (partition, offset), and failures."""

    def __init__(self) -> None:
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.ack_times: list[tuple[float, int]] = []  # (monotonic time, partition) of each ack
        self.errors: list[str] = []

    def callback(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            self.ack_times.append((time.monotonic(), msg.partition()))

    def acks_since(self, t: float) -> dict[int, int]:
        out: dict[int, int] = {}
        for at, p in self.ack_times:
            if at >= t:
                out[p] = out.get(p, 0) + 1
        return out


def failover(topic: str, cids: dict[int, str], figures: dict[str, Any]) -> str:
    """SIGKILL the quorum leader, leader of a partition, while an acks=all producer writes: every
    acknowledged record is read back once at its acknowledged offset, and every partition goes
    on taking writes. Then `docker start` it and wait until it is in sync everywhere again."""
    create_topic(topic)
    # The hardest broker to lose: the metadata quorum's leader, which is also the active
    # controller and leads one of the topic's three partitions (replicas are striped).
    victim = quorum_leader()
    check(victim in SERVICES, f"the quorum leader is {victim}, not a compose broker")
    check(any(x.leader == victim for x in partitions(topic).values()),
          f"{SERVICES[victim]} (quorum leader) leads no partition of {topic}")
    figures["killed"] = SERVICES[victim]
    log = AckLog()
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 180_000, **CLIENT})
    seq = 0

    def produce_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
        """Keep writing (about 500 records a second, bounded by the deadline) until `cond`."""
        nonlocal seq
        deadline = time.monotonic() + timeout
        while not cond():
            check(time.monotonic() < deadline, f"{what} within {timeout}s ({len(log.acked)} acked, "
                  f"{len(p)} waiting, errors: {log.errors[:3]})")
            for _ in range(10):
                p.produce(topic, key=str(seq % 50).encode(), value=f"f-{seq}".encode(), on_delivery=log.callback)
                seq += 1
            p.poll(0.02)

    produce_until(lambda: len(log.acked) >= 1000, 60, "1000 acknowledged writes before the kill")
    before_kill = len(log.acked)
    led_by_victim = [n for n, x in partitions(topic).items() if x.leader == victim]
    sh("docker", "kill", cids[victim])  # SIGKILL: no controlled shutdown, no flush
    killed_at = time.monotonic()
    moved_at: list[float] = []

    def leaders_moved() -> bool:
        if moved_at:
            return True
        if all(x.leader >= 0 and x.leader != victim for x in partitions(topic).values()):
            moved_at.append(time.monotonic())
            return True
        return False

    def serving() -> bool:  # every partition acknowledged 200 writes since its leader moved
        return leaders_moved() and all(log.acks_since(moved_at[0]).get(q, 0) >= 200 for q in range(3))

    produce_until(serving, 120, f"every partition of {topic} taking acks=all writes after {SERVICES[victim]} was killed")
    figures["leaders_moved_s"] = moved_at[0] - killed_at
    remaining = p.flush(90)
    check(remaining == 0, f"{remaining} records still unacknowledged 90 s after the writes stopped")
    check(not log.errors, f"{len(log.errors)} writes failed: {log.errors[:3]}")
    records = read_committed(topic)
    seen: dict[bytes, tuple[int, int]] = {}
    dupes = 0
    for part, off, value in records:
        dupes += value in seen
        seen[value] = (part, off)
    lost = [v for v in log.acked if v not in seen]
    moved = [v for v, at in log.acked.items() if v in seen and seen[v] != at]
    figures.update(acked=len(log.acked), lost=len(lost), duplicated=dupes)
    check(not lost, f"{len(lost)} of {len(log.acked)} acknowledged records lost, e.g. {lost[:3]}")
    check(not dupes, f"{dupes} records read twice")
    check(not moved, f"{len(moved)} records not at the offset their acknowledgement named, e.g. {moved[:3]}")

    # back again
    sh("docker", "start", cids[victim])
    started = time.monotonic()
    wait_healthy({victim: cids[victim]}, timeout=120)

    wait_in_sync(victim)
    figures["rejoined_s"] = time.monotonic() - started
    # and it serves again: a write acknowledged by all three, read back
    p2 = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", **CLIENT})
    after = AckLog()
    for i in range(300):
        p2.produce(topic, value=f"after-restart-{i}".encode(), on_delivery=after.callback)
    check(p2.flush(60) == 0 and not after.errors and len(after.acked) == 300,
          f"writes after the restart: {len(after.acked)} of 300 acknowledged, errors {after.errors[:3]}")
    values = {v for _, _, v in read_committed(topic)}
    check(set(after.acked) <= values and set(log.acked) <= values, "records missing after the restart")
    return (f"killed {SERVICES[victim]} (quorum leader; led {len(led_by_victim)} of 3 partitions) after {before_kill} acks; "
            f"{len(log.acked)} acked, 0 lost, 0 duplicated; leaders moved in {figures['leaders_moved_s']:.1f}s; "
            f"back in every ISR {figures['rejoined_s']:.1f}s after docker start")


def controlled_stop(topic: str, cids: dict[int, str], figures: dict[str, Any]) -> str:
    """`docker stop` (SIGTERM) of a broker leading a partition: it hands its leaderships to the
    other in-sync replicas before it exits 0, so no partition waits for a session timeout."""
    leaders = sorted({x.leader for x in partitions(topic).values()} & set(SERVICES))
    check(leaders, f"no partition of {topic} has a leader")
    node = leaders[0]
    started = time.monotonic()
    sh("docker", "stop", "--time", "30", cids[node])
    figures["sigterm_stop_s"] = time.monotonic() - started
    state = json.loads(sh("docker", "inspect", "-f", "{{json .State}}", cids[node]))
    check(state["ExitCode"] == 0, f"{SERVICES[node]} exited {state['ExitCode']} on SIGTERM")
    logs = sh("docker", "logs", "--tail", "50", cids[node], stderr_too=True)
    check("controlled shutdown: leaderships moved away" in logs,
          f"{SERVICES[node]} stopped without a controlled shutdown; its last lines:\n{logs[-2000:]}")
    # Every broker applies the moves a moment after the controller commits them; an uncontrolled
    # stop would need the 9 s session timeout instead.
    wait_until(lambda: all(x.leader >= 0 and x.leader != node for x in partitions(topic).values()), timeout=3,
               interval=0.1, message=lambda: f"leaders right after {SERVICES[node]} stopped: "
               f"{ {n: x.leader for n, x in partitions(topic).items()} }")
    sh("docker", "start", cids[node])
    wait_healthy({node: cids[node]}, timeout=120)
    wait_in_sync(node)
    return (f"{SERVICES[node]} stopped in {figures['sigterm_stop_s']:.1f}s, exit 0, its leaderships already "
            f"moved; back in every ISR after docker start")


def wait_in_sync(node: int) -> None:
    """Until `node` is in the ISR of every partition (internal topics too) that it is a replica of."""

    def out_of_sync() -> list[str]:
        md = admin().list_topics(timeout=10)
        return [f"{t}-{n}" for t, tm in md.topics.items() for n, x in tm.partitions.items()
                if node in x.replicas and node not in x.isrs]

    wait_until(lambda: not out_of_sync(), timeout=180, interval=0.5,
               message=lambda: f"{SERVICES[node]} back in the ISR; still out of: {out_of_sync()[:5]}")


# A client in another container on the compose network: it bootstraps from the brokers' internal
# listener (the one they also use between themselves), advertised under the service names.
INTERNAL_BOOTSTRAP = "ketch-1:9094,ketch-2:9094,ketch-3:9094"
IN_CONTAINER_CLIENT = """
import asyncio, sys
from client import Admin, Consumer, Producer, Security, TopicPartition

# secured: SASL_SSL as the SCRAM user named in argv[3] (password argv[4]), trusting the mounted CA
sec = Security("SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username=sys.argv[3], sasl_password=sys.argv[4],
               ssl_cafile="/etc/ketch/ca.pem") if len(sys.argv) > 3 else None

async def main(bs: str, topic: str) -> None:
    async with Admin(bs, security=sec) as admin:
        await admin.create_topic(topic, 3)
    async with Producer(bs, transactional_id=topic, security=sec) as p:
        await p.init_transactions()
        async with p.transaction():
            for i in range(30):
                await p.send(topic, b"in-container-%d" % i, key=b"%d" % i)
    seen = []
    async with Consumer(bs, isolation_level="read_committed", auto_offset_reset="earliest", security=sec) as c:
        c.assign([TopicPartition(topic, i) for i in range(3)])
        for _ in range(200):
            for records in (await c.getmany(timeout_ms=200)).values():
                seen += [r.value for r in records]
            if len(seen) >= 30:
                break
    print(len(seen), len(set(seen)))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def client_in_another_container(cids: dict[int, str]) -> str:
    """Run the bundled client in a new container of the broker image, on the compose network."""
    network = json.loads(sh("docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", cids[1]))
    topic = f"compose-inside-{uuid.uuid4().hex[:8]}"
    mount: list[str] = []
    login: list[str] = []
    if SECURE:
        mount = ["-v", f"{SECURE_DIR[0] / 'ca.pem'}:/etc/ketch/ca.pem:ro"]
        login = [CLIENT["sasl.username"], CLIENT["sasl.password"]]
    out = sh("docker", "run", "--rm", "--network", next(iter(network)), "--dns-opt", "timeout:1", *mount,
             "--entrypoint", "python3", IMAGE, "-c", IN_CONTAINER_CLIENT, INTERNAL_BOOTSTRAP, topic, *login,
             timeout=180)
    check(out.split() == ["30", "30"], f"the in-container client read {out.strip()!r}, not 30 distinct records")
    how = f" over SASL_SSL as {APP}" if SECURE else ""
    return (f"a client container on {next(iter(network))} wrote and read 30 records in a transaction via "
            f"{INTERNAL_BOOTSTRAP}{how}")


# ---------------------------------------------------------------------------------------------
# The secured cluster (COMPOSE_TEST_SECURE=1)

SECURE_DIR: list[Path] = []  # where docker/secure-setup.py made this run's certificates and logins


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] not in "#!")


def secure_setup() -> str:
    """This run's certificates and logins, in a new directory docker-compose.secure.yml mounts
    from (KETCH_SECURE_DIR); the administrator's client.properties for the admin clients."""
    d = Path(tempfile.mkdtemp(prefix="ketch-compose-secure-"))
    SECURE_DIR.append(d)
    sh(sys.executable, str(ROOT / "docker" / "secure-setup.py"), str(d))
    os.environ["KETCH_SECURE_DIR"] = str(d)
    ADMIN.update(read_properties(d / "client.properties"))
    BUNDLED["admin"] = security_from_file(str(d / "client.properties"))
    return f"certificates and logins for this run in {d}"


def app_conf(password: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": APP,
            "sasl.password": password, "ssl.ca.location": ADMIN["ssl.ca.location"]}


# What APP may do: everything on the topics, groups and transactional ids the steps name, and
# nothing else (no ACL on the cluster: not even IDEMPOTENT_WRITE, which WRITE on a topic stands
# for, KIP-679).
APP_ACLS = [(kind, APP_PREFIX, AclOperation.ALL)
            for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)]


def scram_user_and_acls() -> str:
    """The administrator creates the SCRAM-SHA-512 user APP and its ACLs (confluent-kafka's
    AdminClient: AlterUserScramCredentials, CreateAcls); every broker then lets APP in and sees
    a topic of APP's through its eyes."""
    password = secrets.token_urlsafe(18)
    a = admin()
    upsert = UserScramCredentialUpsertion(APP, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          password.encode())
    for f in a.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    bindings = [AclBinding(kind, name, ResourcePatternType.PREFIXED, f"User:{APP}", "*", op, AclPermissionType.ALLOW)
                for kind, name, op in APP_ACLS]
    for f in a.create_acls(bindings, request_timeout=30).values():
        f.result(30)
    CLIENT.update(app_conf(password))
    BUNDLED["client"] = client.Security("SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username=APP,
                                        sasl_password=password, ssl_cafile=ADMIN["ssl.ca.location"])
    probe = f"{APP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    create_topic(probe)

    def app_sees_probe(address: str) -> bool:  # a fresh client asks the broker it is bootstrapped from
        try:
            t = AdminClient({"bootstrap.servers": address, **CLIENT}).list_topics(topic=probe, timeout=5).topics
        except KafkaException:
            return False
        return probe in t and t[probe].error is None

    for address in BOOTSTRAP.split(","):
        wait_until(lambda a=address: app_sees_probe(a), timeout=30, interval=0.5,
                   message=f"{APP} logged in at {address} and shown {probe}")
    return (f"SCRAM-SHA-512 user {APP} created, ALL on {APP_PREFIX}* topics, groups and transactional ids; "
            f"every broker lets it in")


def refusals() -> str:
    """What the secured cluster refuses: APP with a wrong password (SASL_AUTHENTICATION_FAILED:
    librdkafka's _AUTHENTICATION), a client in the clear (nothing), APP on a topic no ACL of its
    names (TOPIC_AUTHORIZATION_FAILED)."""
    errors: list[KafkaError] = []
    wrong = Producer({"bootstrap.servers": BOOTSTRAP, **CLIENT, "sasl.password": "not-the-password",
                      "error_cb": errors.append})
    wrong.produce(f"{APP_PREFIX}never", value=b"x")
    wait_until(lambda: wrong.poll(0.2) >= 0 and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
               timeout=30, interval=0.1, message=lambda: f"an authentication error; got {errors[:3]}")
    check(len(wrong) == 1, "a record of a refused login left the producer's queue")
    wrong.purge()
    try:
        AdminClient({"bootstrap.servers": BOOTSTRAP, **QUIET}).list_topics(timeout=5)
        raise Failed("a client in the clear got metadata from a SASL_SSL listener")
    except KafkaException:
        pass
    other = f"other-{uuid.uuid4().hex[:8]}"
    create_topic(other)
    results: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": BOOTSTRAP, **CLIENT, "message.timeout.ms": 20_000})
    p.produce(other, value=b"x", on_delivery=lambda err, _m: results.append(err))
    p.flush(30)
    check(len(results) == 1 and results[0] is not None
          and results[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"{APP} writing {other} (no ACL): {results}, not TOPIC_AUTHORIZATION_FAILED")
    return ("wrong password: librdkafka's _AUTHENTICATION (SASL_AUTHENTICATION_FAILED); in the clear: no metadata; "
            f"{other} without an ACL: TOPIC_AUTHORIZATION_FAILED")


@contextmanager
def step(name: str, results: list[tuple[str, bool, str]], t0: float) -> Iterator[None]:
    start = time.monotonic()
    print(f"[{start - t0:6.1f}s] {name} ...", flush=True)
    try:
        yield
    except BaseException as e:
        results.append((name, False, str(e).splitlines()[0] if str(e) else type(e).__name__))
        print(f"[{time.monotonic() - t0:6.1f}s] {name}: FAILED ({time.monotonic() - start:.1f}s)\n{e}", flush=True)
        if not isinstance(e, Failed | AssertionError):
            traceback.print_exc()
        raise
    results.append((name, True, ""))


def main() -> int:
    t0 = time.monotonic()
    results: list[tuple[str, bool, str]] = []
    figures: dict[str, Any] = {}
    notes: list[str] = []
    failed = False
    try:
        if SECURE:
            with step("certificates and logins for the run (docker/secure-setup.py)", results, t0):
                notes.append("secure: " + secure_setup())
        with step("build the image (docker compose build)", results, t0):
            start = time.monotonic()
            compose("build")
            figures["build_s"] = time.monotonic() - start
            figures["image_mb"] = int(sh("docker", "image", "inspect", "-f", "{{.Size}}", IMAGE)) / 1e6
        with step("docker compose up -d --build, wait for three healthy brokers", results, t0):
            start = time.monotonic()
            compose("up", "-d", "--build")
            cids = {n: container(s) for n, s in SERVICES.items()}
            wait_healthy(cids, timeout=180)
            figures["healthy_s"] = time.monotonic() - start
            user = sh("docker", "exec", cids[1], "id", "-un").strip()
            check(user == "ketch", f"the broker runs as {user!r}, not the non-root user ketch")
        if SECURE:
            with step(f"the administrator creates the SCRAM user {APP} and its ACLs", results, t0):
                notes.append("users: " + scram_user_and_acls())
            with step("refused: a wrong password, a client in the clear, a topic without an ACL", results, t0):
                notes.append("refused: " + refusals())
        with step("transactions and a consumer group, confluent-kafka", results, t0):
            notes.append("confluent: " + txn_round_trip_confluent(f"compose-confluent-{uuid.uuid4().hex[:8]}"))
        with step("transactions and a consumer group, bundled client", results, t0):
            notes.append("bundled: " + asyncio.run(txn_round_trip_bundled(f"compose-bundled-{uuid.uuid4().hex[:8]}")))
        with step("a client in another container, through the brokers' internal listener", results, t0):
            notes.append("inside: " + client_in_another_container(cids))
        with step("docker kill the quorum leader, leading a partition, under acks=all writes; docker start it", results, t0):
            topic = f"compose-failover-{uuid.uuid4().hex[:8]}"
            notes.append("failover: " + failover(topic, cids, figures))
        with step("docker stop (SIGTERM) a partition leader: controlled shutdown; docker start it", results, t0):
            notes.append("SIGTERM: " + controlled_stop(topic, cids, figures))
    except BaseException:
        failed = True
        try:
            LOG_FILE.write_text(compose("logs", "--no-color", "--timestamps", timeout=120))
            print(f"broker logs: {LOG_FILE}")
        except Exception as e:  # the logs are a courtesy; the failure is already recorded
            print(f"could not save the broker logs: {e}")
    finally:
        try:
            with step("docker compose down -v", results, t0):
                compose("down", "-v", "--remove-orphans", "--timeout", "30", timeout=300)
                left = sh("docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}")
                check(not left.strip(), f"volumes left behind: {left.split()}")
        except BaseException:
            failed = True
        for d in SECURE_DIR:  # this run's keys and passwords go with it
            shutil.rmtree(d, ignore_errors=True)
    for n in notes:
        print(n)
    total = time.monotonic() - t0 + float(os.environ.get("COMPOSE_TEST_SETUP_S", "0"))
    passed = sum(ok for _, ok, _ in results)
    fig = ["secured: SASL_SSL, SCRAM, ACLs"] if SECURE else []
    if "image_mb" in figures:
        fig.append(f"image {figures['image_mb']:.0f} MB, built in {figures['build_s']:.0f}s")
    if "healthy_s" in figures:
        fig.append(f"healthy {figures['healthy_s']:.1f}s after up")
    if "lost" in figures:
        fig.append(f"{figures['killed']} killed: {figures['acked']} acked, {figures['lost']} lost, "
                   f"{figures['duplicated']} duplicated")
    if failed:
        first = next(((name, why) for name, ok, why in results if not ok), ("?", "?"))
        print(f"compose-test: FAILED at '{first[0]}': {first[1]} ({passed} steps passed; {total:.0f}s; {'; '.join(fig)})")
        return 1
    print(f"compose-test: PASSED {passed} steps in {total:.0f}s ({'; '.join(fig)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
