"""The `ketch` command line: `ketch broker` runs a broker, `ketch cluster up` several; the other
subcommands (administration, console producer and consumer) come from the client package."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from importlib.metadata import entry_points

from storage import faults
from storage.fs import OS_FS

from . import cluster_up
from .config import ConfigError, load_config
from .logs import configure


def _broker(args: argparse.Namespace) -> int:
    import uvloop

    from .server import BrokerServer

    try:
        cfg = load_config(args.config, overrides={
            "listen": args.listen, "advertise": args.advertise, "data_dir": args.data_dir, "node_id": args.node_id,
            "metrics_listen": args.metrics_listen, "controller_listen": args.controller_listen, "voters": args.voters,
        })
    except ConfigError as e:
        print(f"ketch broker: {e}", file=sys.stderr)
        return 2
    configure(cfg.log_format, cfg.log_level)
    faults.announce()

    async def run() -> None:
        fs, dying_disk = faults.file_system(OS_FS)
        server = BrokerServer(cfg, fs=fs)
        loop = asyncio.get_running_loop()
        if dying_disk is not None:
            loop.add_signal_handler(faults.DYING_SIGNAL, dying_disk.die)
        await server.start()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.stop()

    try:
        with contextlib.suppress(KeyboardInterrupt):
            uvloop.run(run())
    except ConfigError as e:  # found at start-up: a port taken, a data directory we cannot use
        print(f"ketch broker: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="ketch", description="Ketch: a Kafka-compatible broker")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("broker", help="run a broker")
    b.add_argument("--listen", help="HOST:PORT to listen on (default 0.0.0.0:9092)")
    b.add_argument("--advertise", help="HOST:PORT given to clients (default: the listen address)")
    b.add_argument("--metrics-listen", dest="metrics_listen",
                   help="HOST:PORT for Prometheus metrics at /metrics (default: none)")
    b.add_argument("--data-dir", dest="data_dir", help="where logs live (default ./data)")
    b.add_argument("--node-id", dest="node_id", type=int, help="this broker's node id (default 1)")
    b.add_argument("--controller-listen", dest="controller_listen",
                   help="HOST:PORT of this node's controller listener when it is the only voter (default any free port)")
    b.add_argument("--voters", help="the metadata quorum: NODE_ID@HOST:PORT,... of every voter's controller listener "
                                    "(default: this node alone)")
    b.add_argument("--config", help="TOML file of settings (see docs/configuration.md)")
    b.set_defaults(func=_broker)
    c = sub.add_parser("cluster", help="start a local cluster; describe the metadata quorum; drain a broker")
    csub = c.add_subparsers(dest="action", required=True)
    cluster_up.add_parser(csub)
    # The admin commands (`ketch topic|group|txn`, `ketch cluster describe|drain`) and `ketch
    # produce|consume` are the client's (client/admin_cli/, client/console.py): found through entry
    # points, so the broker package keeps not importing the client (docs/architecture.md §1).
    # `ketch broker` loads none of them: a broker must start whatever the installed client
    # commands are (a stale editable install once kept every restarted chaos broker down).
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] != ["broker"]:
        for group, parent in (("ketch.commands", sub), ("ketch.cluster_commands", csub)):
            for ep in entry_points(group=group):
                ep.load()(parent)
    args = p.parse_args(args_in)
    sys.exit(args.func(args))
