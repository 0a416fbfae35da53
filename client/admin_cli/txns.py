"""`ketch txn ...`: list, describe, find hanging and abort transactions (kafka-transactions), and
list and complete prepared ones (two-phase commit, KIP-939). A transaction's state is its
coordinator's; the producer state of a partition (which transactions are open in it) is the
partition leader's."""

from __future__ import annotations

import argparse
from typing import Any

from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode

from ..admin import Admin
from ..errors import KafkaClientError
from ..producer import Producer
from ..structs import TopicPartition
from ..transactions import TWO_PC_TIMEOUT_MS
from .support import CommandError, print_rows, subcommands

PREPARED = "prepared"  # `--state prepared`: the open transactions of two-phase-commit ids


def _now_ms() -> int:
    return SYSTEM_CLOCK.now_ms()


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    """Every coordinator's transactional ids (each broker coordinates its own share)."""
    if any(s.lower() == PREPARED for s in args.state):
        if len(args.state) > 1:
            raise CommandError("--state prepared lists on its own (prepared transactions are Ongoing ones)")
        print_rows(await _prepared(admin, args), args.json)
        return
    listed = await admin.list_transactions(states=args.state, producer_ids=args.producer_ids,
                                           min_duration_ms=args.duration_ms)
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in (await admin.describe_cluster()).brokers}
    print_rows([{"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state,
                 "coordinator": brokers.get(t.coordinator_id, str(t.coordinator_id))}
                for t in sorted(listed, key=lambda t: t.transactional_id)], args.json)


async def _prepared(admin: Admin, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Open transactions of two-phase-commit ids (KIP-939): Kafka has no state of that name — a
    prepared transaction is an Ongoing one whose id has no timeout — so these are the Ongoing
    ones, described to see their timeout. Each holds back the LSO of its partitions until
    whoever holds its token, or an operator (`complete`), ends it."""
    rows = []
    for t in sorted(await admin.list_transactions(states=["Ongoing"], producer_ids=args.producer_ids,
                                                  min_duration_ms=args.duration_ms),
                    key=lambda t: t.transactional_id):
        try:
            d = await describe(admin, t.transactional_id)
        except CommandError:
            continue  # ended and expired since it was listed
        if d["two_pc"] and d["state"] == "Ongoing":
            rows.append({k: d[k] for k in ("transactional_id", "producer_id", "producer_epoch", "start_ms",
                                           "duration_ms", "partitions")})
    return rows


async def describe(admin: Admin, tid: str) -> dict[str, Any]:
    try:
        t = (await admin.describe_transactions([tid]))[tid]
    except KafkaClientError as e:
        raise CommandError(f"describing {tid!r}: {e}") from None
    start = t.start_time_ms
    return {"transactional_id": tid, "state": t.state, "producer_id": t.producer_id,
            "producer_epoch": t.producer_epoch, "timeout_ms": t.timeout_ms,
            "two_pc": t.timeout_ms == TWO_PC_TIMEOUT_MS, "start_ms": start,
            "duration_ms": _now_ms() - start if start >= 0 and t.state == "Ongoing" else -1,
            "partitions": [f"{tp.topic}-{tp.partition}" for tp in t.partitions]}


async def _describe(admin: Admin, args: argparse.Namespace) -> None:
    d = await describe(admin, args.transactional_id)
    if args.json:
        print_rows([d], True)
        return
    for k, v in d.items():
        print(f"{k}: {', '.join(v) if isinstance(v, list) else v}")


async def _find_hanging(admin: Admin, args: argparse.Namespace) -> None:
    """Open transactions in partitions that their coordinator does not know as ongoing there
    (KIP-664): older than the longest allowed transaction, and either no coordinator has the
    producer id, or its transaction does not include the partition (or has a newer epoch)."""
    try:
        topics = await admin.describe_topics(None if args.topic is None else [args.topic])
    except KafkaClientError as e:
        raise CommandError(f"topic {args.topic!r}: {e}") from None
    tps = []
    for name, t in sorted(topics.items()):
        for p in t.partitions:
            if p.leader < 0:
                raise CommandError(f"{name}-{p.partition} has no leader right now; try again")
            tps.append(TopicPartition(name, p.partition))
    now = _now_ms()
    candidates: list[dict[str, Any]] = [{"topic": tp.topic, "partition": tp.partition, "producer_id": s.producer_id,
                   "producer_epoch": s.producer_epoch, "coordinator_epoch": s.coordinator_epoch,
                   "start_offset": s.current_txn_start_offset, "last_timestamp": s.last_timestamp}
                  for tp, states in sorted((await admin.describe_producers_of(tps)).items()) for s in states
                  if s.current_txn_start_offset >= 0 and now - s.last_timestamp >= args.max_transaction_timeout_ms]
    known: dict[int, str] = {}
    if candidates:
        known = {t.producer_id: t.transactional_id for t in await admin.list_transactions(
            producer_ids=sorted({c["producer_id"] for c in candidates}))}
    hanging = []
    for c in candidates:
        tid = known.get(c["producer_id"])
        if tid is not None:
            d = await describe(admin, tid)
            if (d["state"] == "Ongoing" and d["producer_epoch"] == c["producer_epoch"]
                    and f"{c['topic']}-{c['partition']}" in d["partitions"]):
                continue  # a live transaction, merely long
        hanging.append({**c, "transactional_id": tid or "?"})
    print_rows(hanging, args.json)


async def _abort(admin: Admin, args: argparse.Namespace) -> None:
    """Write an abort marker straight into one partition, as a coordinator would: the way out
    of a hanging transaction that no coordinator will ever end (Kafka's `abort` command)."""
    tp = TopicPartition(args.topic, args.partition)
    where = f"{args.topic}-{args.partition}"
    pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    try:
        if args.start_offset is not None:
            found = [s for s in await admin.describe_producers(tp) if s.current_txn_start_offset == args.start_offset]
            if not found:
                raise CommandError(f"no open transaction starts at offset {args.start_offset} in {where}")
            pid, epoch, coordinator_epoch = found[0].producer_id, found[0].producer_epoch, max(
                found[0].coordinator_epoch, 0)
        if pid is None or epoch is None or coordinator_epoch is None:
            raise CommandError("give --start-offset, or all of --producer-id, --producer-epoch, --coordinator-epoch")
        await admin.abort_transaction(tp, pid, epoch, coordinator_epoch)
    except KafkaClientError as e:
        hint = ("; markers are written only through the inter-broker listener (inter_broker_listen; the broker "
                "logs it at start as inter_broker): give that address as --bootstrap"
                if e.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else "")
        raise CommandError(f"aborting in {where}: {e}{hint}") from None
    print_rows([{"topic": args.topic, "partition": args.partition, "producer_id": pid, "producer_epoch": epoch,
                 "aborted": True}], args.json)


async def _complete(admin: Admin, args: argparse.Namespace) -> None:
    """Commit or abort the prepared transaction of a transactional id, as a new instance of its
    producer would (InitProducerId with KeepPreparedTxn, then EndTxn): for an operator whose
    two-phase-commit coordinator of record is gone. The instance that prepared it is fenced."""
    tid = args.transactional_id
    ms = int(args.timeout * 1000)
    async with Producer(args.bootstrap, transactional_id=tid, max_block_ms=ms, request_timeout_ms=ms) as p:
        try:
            held = await p.init_transactions(keep_prepared=True)
        except KafkaClientError as e:
            if e.code == ErrorCode.INVALID_TXN_STATE:
                raise CommandError(f"{tid!r} has a transaction open that is not a two-phase-commit one: its "
                                   "timeout ends it") from None
            raise CommandError(f"taking over {tid!r}: {e}") from None
        if held is None:
            print_rows([{"transactional_id": tid, "producer_id": -1, "producer_epoch": -1,
                         "result": "nothing open"}], args.json)
            return
        try:
            await p.complete_transaction(held, commit=args.commit)
        except KafkaClientError as e:
            raise CommandError(f"{'committing' if args.commit else 'aborting'} {tid!r}: {e}") from None
    print_rows([{"transactional_id": tid, "producer_id": held.producer_id, "producer_epoch": held.epoch,
                 "result": "committed" if args.commit else "aborted"}], args.json)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    x = sub.add_parser("txn", help="list, describe, find hanging, abort or complete transactions")
    action = subcommands(x.add_subparsers(dest="action", required=True), common)
    xl = action("list", _list)
    xl.add_argument("--state", action="append", default=[],
                    help="Ongoing, PrepareCommit, ... (repeatable); or 'prepared' alone: the open transactions "
                         "of two-phase-commit ids")
    xl.add_argument("--producer-id", action="append", type=int, default=[], dest="producer_ids")
    xl.add_argument("--duration-ms", type=int, default=-1, help="only transactions running at least this long")
    action("describe", _describe).add_argument("transactional_id")
    xh = action("find-hanging", _find_hanging)
    xh.add_argument("--topic", help="only this topic (default: all)")
    xh.add_argument("--max-transaction-timeout-ms", type=int, default=900_000,
                    help="the brokers' transaction_max_timeout_ms: younger transactions are not hanging yet")
    xa = action("abort", _abort)
    xa.add_argument("--topic", required=True)
    xa.add_argument("--partition", type=int, required=True)
    xa.add_argument("--start-offset", type=int, help="first offset of the open transaction (from find-hanging)")
    xa.add_argument("--producer-id", type=int)
    xa.add_argument("--producer-epoch", type=int)
    xa.add_argument("--coordinator-epoch", type=int)
    xc = action("complete", _complete, help="commit or abort the prepared (two-phase-commit) transaction of an id")
    xc.add_argument("transactional_id")
    how = xc.add_mutually_exclusive_group(required=True)
    how.add_argument("--commit", action="store_true")
    how.add_argument("--abort", dest="commit", action="store_false")
