"""`ketch cluster up -n N`: N broker processes on this machine forming one metadata quorum.

Node i listens for clients on base-port + i - 1 and on base-port + 100 + i - 1 for the quorum
(its controller listener), keeps its data in DATA_DIR/node-i, and is started with the same
`--voters` list as the others. Their logs are streamed with a `[node i]` prefix; Ctrl-C (or
SIGTERM) stops them all, cleanly, and the command waits for them. A broker that dies on its own
stops the others and makes the command exit non-zero.

`--secure`: every listener secured (docs/security.md). Certificates are made for the run with the
openssl command line (a CA, and one broker certificate for HOST, localhost and 127.0.0.1) in
DATA_DIR/secure, with a PLAIN login for the brokers (the one super user) and one for an
administrator; clients reach the brokers over SASL_SSL on the same ports, the brokers each other
over SASL_SSL (inter-broker listener on base-port + 200 + i - 1) and SASL_SSL controller
listeners. DATA_DIR/secure/client.properties holds the administrator's settings for
`--command-config` (then `ketch user scram set` adds SCRAM users).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CONTROLLER_PORT_OFFSET = 100
INTER_BROKER_PORT_OFFSET = 200  # --secure: the inter-broker listeners


def _commands(n: int, base_port: int, data_dir: Path, host: str, secure: bool = False) -> dict[int, list[str]]:
    voters = ",".join(f"{i}@{host}:{base_port + CONTROLLER_PORT_OFFSET + i - 1}" for i in range(1, n + 1))
    # secured, the client listener is named in `listeners` (the environment), not --listen
    return {i: [sys.executable, "-m", "broker", "broker", "--node-id", str(i),
                *([] if secure else ["--listen", f"{host}:{base_port + i - 1}"]),
                "--data-dir", str(data_dir / f"node-{i}"), "--voters", voters] for i in range(1, n + 1)}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def secure_files(d: Path, names: Sequence[str]) -> dict[str, str]:
    """A CA, one broker certificate valid for `names` (host names and IP addresses), and PLAIN
    logins for the brokers (`broker`) and an administrator (`admin`), made once in `d` and kept;
    the logins, NAME -> PASSWORD. `ketch cluster up --secure` and the compose cluster's secure
    mode (docker/secure-setup.py) both make theirs here."""
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "broker.pem").exists():
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=ketch-local-ca",
                 "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ketch-broker", "-keyout", "broker.key",
                 "-out", "broker.csr", cwd=d)
        sans = dict.fromkeys(f"IP:{n}" if n.replace(".", "").isdigit() else f"DNS:{n}" for n in names)
        (d / "broker.ext").write_text(f"subjectAltName={','.join(sans)}\n")
        _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "30", "-extfile", "broker.ext", "-out", "broker.pem", cwd=d)
    users = d / "plain-users"
    if not users.exists():
        users.write_text(f"broker:{secrets.token_urlsafe(18)}\nadmin:{secrets.token_urlsafe(18)}\n")
        users.chmod(0o600)
    return dict(line.split(":", 1) for line in users.read_text().splitlines() if ":" in line)


def admin_properties(d: Path, logins: dict[str, str]) -> Path:
    """The administrator's client properties (Kafka's names), for `--command-config` and librdkafka."""
    props = d / "client.properties"
    props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                     f"sasl.password={logins['admin']}\nssl.ca.location={d / 'ca.pem'}\n")
    props.chmod(0o600)
    return props


def broker_env(d: Path, logins: dict[str, str]) -> dict[str, str]:
    """The settings every broker of a secured cluster shares, the files at their paths under `d`:
    SASL_SSL inter-broker and controller listeners, the brokers' own login the one super user."""
    return {"KETCH_LISTENER_SECURITY_PROTOCOL_MAP": "BROKER:SASL_SSL,CONTROLLER:SASL_SSL",
            "KETCH_SSL_KEYSTORE_LOCATION": str(d / "broker.pem"), "KETCH_SSL_KEY_LOCATION": str(d / "broker.key"),
            "KETCH_SSL_TRUSTSTORE_LOCATION": str(d / "ca.pem"), "KETCH_SASL_PLAIN_USERS_FILE": str(d / "plain-users"),
            "KETCH_SASL_INTER_BROKER_USERNAME": "broker", "KETCH_SASL_INTER_BROKER_PASSWORD": logins["broker"],
            "KETCH_SUPER_USERS": "User:broker"}


def secure_setup(data_dir: Path, host: str) -> tuple[dict[str, str], Path]:
    """Certificates and logins for a secured run (made once, kept in DATA_DIR/secure): the
    settings every broker shares, and the administrator's client.properties."""
    d = data_dir / "secure"
    logins = secure_files(d, [host, "localhost", "127.0.0.1"])
    return broker_env(d, logins), admin_properties(d, logins)


async def _pump(node: int, stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        sys.stdout.write(f"[node {node}] {line.decode(errors='replace')}")
        sys.stdout.flush()


async def up(n: int, base_port: int, data_dir: Path, host: str, secure: bool = False) -> int:
    procs: dict[int, asyncio.subprocess.Process] = {}
    pumps = []
    shared, props = secure_setup(data_dir, host) if secure else ({}, None)
    for node, cmd in _commands(n, base_port, data_dir, host, secure).items():
        env = None
        if secure:
            env = {**os.environ, **shared, "KETCH_LISTENERS": f"SASL_SSL://{host}:{base_port + node - 1}",
                   "KETCH_INTER_BROKER_LISTEN": f"{host}:{base_port + INTER_BROKER_PORT_OFFSET + node - 1}"}
        p = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT, env=env)
        procs[node] = p
        assert p.stdout is not None
        pumps.append(asyncio.create_task(_pump(node, p.stdout)))
    bootstrap = ",".join(f"{host}:{base_port + i - 1}" for i in range(1, n + 1))
    print(f"ketch cluster: {n} brokers, bootstrap {bootstrap} (Ctrl-C stops them)", flush=True)
    if props is not None:
        print(f"ketch cluster: secured (SASL_SSL): the administrator's login is in {props}, for --command-config",
              flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waits = {asyncio.create_task(p.wait()): node for node, p in procs.items()}
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *waits], return_when=asyncio.FIRST_COMPLETED)
    died = [waits[t] for t in done if t in waits]
    for p in procs.values():
        if p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs.values())), 30)
    except TimeoutError:
        for p in procs.values():
            if p.returncode is None:
                p.kill()
        await asyncio.gather(*(p.wait() for p in procs.values()))
    await asyncio.gather(*pumps, return_exceptions=True)
    if died:
        print(f"ketch cluster: node {died[0]} exited on its own; stopped the others", file=sys.stderr)
        return 1
    print("ketch cluster: stopped", flush=True)
    return 0


def add_parser(csub: Any) -> None:
    """`up` under `ketch cluster` (its other subcommands are the client's: client/admin_cli/)."""
    u = csub.add_parser("up", help="start N local brokers forming one metadata quorum")
    u.add_argument("-n", type=int, default=3, help="how many brokers (default 3)")
    u.add_argument("--data-dir", default="./cluster", help="their data, one directory each (default ./cluster)")
    u.add_argument("--base-port", type=int, default=9092, help="node i listens on base-port + i - 1 (default 9092)")
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--secure", action="store_true",
                   help="every listener SASL_SSL, certificates made for the run (docs/security.md)")
    u.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        print("error: -n must be at least 1", file=sys.stderr)
        return 2
    return asyncio.run(up(args.n, args.base_port, Path(args.data_dir), args.host, args.secure))
