"""`ketch produce` and `ketch consume`: lines in, records out, with the bundled client.

The console tools of Kafka (kafka-console-producer/-consumer) for a user without kcat. They live
with the client and are registered with the `ketch` command through the `ketch.commands` entry
point, because the broker never imports the client (docs/architecture.md §1).

Producing stops at the first line that cannot be sent (too large for the topic, a missing topic,
a broker error): what was acknowledged before it stays, nothing after it is sent, the exit status
is 1 and stderr says which line and how many were acknowledged. In a transactional run, every
`--batch` lines are one transaction; the open transaction is aborted on an error, the committed
ones stay.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode

from .admin import Admin
from .consumer import Consumer
from .errors import KafkaClientError
from .producer import Producer
from .structs import ConsumerRecord, RecordMetadata, TopicPartition

DEFAULT_BOOTSTRAP = "localhost:9092"
PROGRESS_EVERY_S = 2.0
COMMIT_EVERY_S = 5.0
READ_CHUNK = 1 << 16
MAX_LINE = 64 << 20  # longer than any max.message.bytes a broker would accept


class ConsoleError(Exception):
    """What stops a console command: printed as one line, exit status 1."""


# ---- input ---------------------------------------------------------------------------------------

async def _lines(src: IO[bytes]) -> AsyncIterator[bytes]:
    """Lines without their end-of-line. A regular file is read directly (never blocks for
    long); a pipe or terminal through the event loop, so records already typed are sent while
    the next line is awaited."""
    if stat.S_ISREG(os.fstat(src.fileno()).st_mode):
        n = 0
        for raw in src:
            yield raw.rstrip(b"\r\n")
            n += 1
            if n % 512 == 0:
                await asyncio.sleep(0)  # let the sender drain
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), src)
    try:
        while True:
            try:
                raw = await reader.readline()
            except ValueError as e:  # the limit: a line longer than anything a broker takes
                raise ConsoleError(f"a line longer than {MAX_LINE} bytes: {e}") from None
            if not raw:
                return
            yield raw.rstrip(b"\r\n")
    finally:
        transport.close()


def _headers(pairs: list[str]) -> tuple[tuple[str, bytes | None], ...]:
    out = []
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConsoleError(f"--header {p!r}: expected KEY=VALUE")
        out.append((k, v.encode()))
    return tuple(out)


class _Progress:
    """A line on stderr every few seconds while a long input is being produced."""

    def __init__(self, topic: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self.topic = topic
        self.clock = clock
        self.start = self.last = clock.monotonic()
        self.tty = sys.stderr.isatty()

    def tick(self, sent: int, acked: int) -> None:
        now = self.clock.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        rate = acked / max(now - self.start, 1e-9)
        end = "\r" if self.tty else "\n"
        print(f"{self.topic}: {sent} lines sent, {acked} acknowledged ({rate:,.0f}/s)", end=end,
              file=sys.stderr, flush=True)

    def done(self, acked: int, extra: str = "") -> None:
        if self.tty and self.last != self.start:
            print(file=sys.stderr)
        took = self.clock.monotonic() - self.start
        print(f"{self.topic}: {acked} lines acknowledged{extra} ({took:.1f}s)", file=sys.stderr)


# ---- produce -------------------------------------------------------------------------------------

class _Acks:
    """Counts acknowledged lines and keeps the first failure (by line number)."""

    def __init__(self) -> None:
        self.count = 0
        self.failure: tuple[int, BaseException] | None = None

    def watch(self, fut: asyncio.Future[RecordMetadata], line_no: int) -> None:
        fut.add_done_callback(lambda f: self._done(f, line_no))

    def _done(self, fut: asyncio.Future[RecordMetadata], line_no: int) -> None:
        if fut.cancelled():
            err: BaseException | None = asyncio.CancelledError()
        else:
            err = fut.exception()
        if err is None:
            self.count += 1
        elif self.failure is None or line_no < self.failure[0]:
            self.failure = (line_no, err)


async def _topic_limit(bootstrap: str, topic: str, timeout_s: float) -> int | None:
    """The topic's max.message.bytes, so a line over it is refused before it is sent — and so
    batches are never larger, which would make the broker refuse lines that fit."""
    with contextlib.suppress(KafkaClientError, asyncio.TimeoutError, OSError):
        async with Admin(bootstrap) as admin:
            limit = (await asyncio.wait_for(admin.describe_topic_configs(topic), timeout_s)).get("max.message.bytes")
            return int(limit) if limit else None
    return None


async def produce(args: argparse.Namespace) -> int:
    headers = _headers(args.header)
    sep = args.key_separator.encode() if args.key_separator is not None else None
    acks: int | str = "all" if args.acks in ("all", "-1") else int(args.acks)
    limit = await _topic_limit(args.bootstrap, args.topic, args.max_block_ms / 1000)
    batch_size = 16_384 if limit is None else max(1, min(16_384, limit))
    producer = Producer(args.bootstrap, client_id="ketch-console-producer", acks=acks,
                        transactional_id=args.transactional_id, compression=args.compression,
                        max_block_ms=args.max_block_ms, batch_size=batch_size,
                        max_request_size=limit if limit is not None else 1_048_576)
    src = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115 - closed below
    acked = _Acks()
    progress = _Progress(args.topic)
    txn = args.transactional_id is not None
    committed_lines = committed_txns = in_txn = 0
    sent = 0
    error: str | None = None
    try:
        await producer.start()
        if txn:
            await producer.init_transactions()
        async for line in _lines(src):
            if acked.failure is not None:
                break
            sent += 1
            key, value = None, line
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    raise ConsoleError(f"line {sent}: no key separator {args.key_separator!r}")
            if txn and in_txn == 0:
                await producer.begin_transaction()
            try:
                fut = await producer.send(args.topic, value, key=key, partition=args.partition, headers=headers)
            except KafkaClientError as e:
                if e.code == ErrorCode.MESSAGE_TOO_LARGE and limit is not None:
                    raise ConsoleError(f"line {sent}: MESSAGE_TOO_LARGE: {len(line)} bytes, over the "
                                       f"max.message.bytes of {args.topic} ({limit})") from None
                raise ConsoleError(f"line {sent}: {e}") from None
            except ValueError as e:
                raise ConsoleError(f"line {sent}: {e}") from None
            acked.watch(fut, sent)
            if txn:
                in_txn += 1
                if in_txn == args.batch:
                    await producer.commit_transaction()
                    committed_txns += 1
                    committed_lines += in_txn
                    in_txn = 0
            progress.tick(sent, acked.count)
        if txn and in_txn and acked.failure is None:
            await producer.commit_transaction()
            committed_txns += 1
            committed_lines += in_txn
            in_txn = 0
        await producer.flush()
    except ConsoleError as e:
        error = str(e)
    except KafkaClientError as e:
        error = f"line {sent}: {e}"
    finally:
        if txn and in_txn:
            with contextlib.suppress(KafkaClientError):
                await producer.abort_transaction()
        with contextlib.suppress(KafkaClientError):
            await producer.close()
        if src is not sys.stdin.buffer:
            src.close()
    if acked.failure is not None and error is None:
        line_no, err = acked.failure
        error = f"line {line_no}: {err}"
    if txn:
        progress.done(committed_lines, f" in {committed_txns} transactions")
        if in_txn:
            print(f"{args.topic}: the open transaction of {in_txn} lines was aborted", file=sys.stderr)
    else:
        progress.done(acked.count)
    if error is not None:
        raise ConsoleError(error)
    return 0


# ---- consume -------------------------------------------------------------------------------------

def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", "backslashreplace")


def _formatter(fmt: str | None, as_json: bool) -> Callable[[ConsumerRecord], str]:
    if as_json:
        def to_json(r: ConsumerRecord) -> str:
            return json.dumps({
                "topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                "key": None if r.key is None else _text(r.key), "value": None if r.value is None else _text(r.value),
                "headers": [[k, None if v is None else _text(v)] for k, v in r.headers]})
        return to_json
    template = (fmt or "{value}").replace("\\t", "\t").replace("\\n", "\n")

    def to_text(r: ConsumerRecord) -> str:
        return template.format(
            topic=r.topic, partition=r.partition, offset=r.offset, timestamp=r.timestamp, key=_text(r.key),
            value=_text(r.value), headers=",".join(f"{k}={_text(v)}" for k, v in r.headers))
    try:
        template.format(topic="", partition=0, offset=0, timestamp=0, key="", value="", headers="")
    except (KeyError, IndexError, ValueError) as e:
        raise ConsoleError(f"--format {fmt!r}: {e!r} (placeholders: {{topic}} {{partition}} {{offset}} "
                           "{timestamp} {key} {value} {headers})") from None
    return to_text


async def consume(args: argparse.Namespace) -> int:
    fmt = _formatter(args.format, args.json)
    if args.group is not None and args.partition is not None:
        raise ConsoleError("--partition and --group exclude each other: a group assigns the partitions")
    # Commits cover what was printed, never a record fetched but cut off by --max-messages.
    c = Consumer(args.bootstrap, group_id=args.group, client_id="ketch-console-consumer",
                 isolation_level=args.isolation_level, enable_auto_commit=False,
                 auto_offset_reset="earliest" if args.from_beginning else "latest")
    out = sys.stdout
    count = 0
    printed: dict[TopicPartition, int] = {}
    last_commit = SYSTEM_CLOCK.monotonic()

    async def commit() -> None:
        nonlocal last_commit
        if args.group is not None and printed:
            await c.commit(dict(printed))
            printed.clear()
        last_commit = SYSTEM_CLOCK.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await c.start()
        if args.group is not None:
            c.subscribe([args.topic])
        else:
            async with Admin(args.bootstrap) as admin:
                try:
                    desc = (await admin.describe_topics([args.topic]))[args.topic]
                except KafkaClientError as e:
                    raise ConsoleError(f"topic {args.topic!r}: {e}") from None
            parts = [p.partition for p in desc.partitions]
            if args.partition is not None:
                if args.partition not in parts:
                    raise ConsoleError(f"topic {args.topic!r} has no partition {args.partition}")
                parts = [args.partition]
            tps = [TopicPartition(args.topic, p) for p in parts]
            c.assign(tps)
            if args.from_beginning:
                c.seek_to_beginning(*tps)
            else:
                c.seek_to_end(*tps)
        idle_since = SYSTEM_CLOCK.monotonic()
        while not stop.is_set() and (args.max_messages is None or count < args.max_messages):
            batches = await c.getmany(timeout_ms=200)
            got = False
            for recs in batches.values():
                for r in recs:
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                    out.write(fmt(r))
                    out.write("\n")
                    count += 1
                    printed[TopicPartition(r.topic, r.partition)] = r.offset + 1
                    got = True
            if got:
                out.flush()
                idle_since = SYSTEM_CLOCK.monotonic()
            elif args.timeout_ms is not None and (SYSTEM_CLOCK.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                break
            if SYSTEM_CLOCK.monotonic() - last_commit >= COMMIT_EVERY_S:
                await commit()
        await commit()
    except KafkaClientError as e:
        raise ConsoleError(str(e)) from None
    finally:
        with contextlib.suppress(KafkaClientError):
            await c.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


# ---- command line --------------------------------------------------------------------------------

def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _run(coro_fn: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            import uvloop
            result: int = uvloop.run(coro_fn(args))
        except ConsoleError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except BrokenPipeError:  # `ketch consume ... | head`: the reader is gone, not an error
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - quiets the flush at exit
            return 0
        except KeyboardInterrupt:
            return 130
        return result
    return run


def add_parsers(sub: Any) -> None:
    """Called by `ketch` (broker/cli.py) through the `ketch.commands` entry point."""
    p = sub.add_parser("produce", help="send lines from stdin or a file as records (like kafka-console-producer)")
    p.add_argument("topic")
    p.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP, help=f"HOST:PORT (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--file", help="read lines from this file instead of stdin")
    p.add_argument("--key-separator", help="each line is KEY<sep>VALUE (a line without it is an error)")
    p.add_argument("--header", action="append", default=[], metavar="K=V", help="a header on every record (repeatable)")
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--acks", choices=["all", "-1", "1", "0"], default="all")
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    p.add_argument("--transactional-id", help="send in transactions of --batch lines each")
    p.add_argument("--batch", type=_positive, default=1000, help="lines per transaction (default 1000)")
    p.add_argument("--max-block-ms", type=_positive, default=60_000,
                   help="how long to wait for a missing topic or a full buffer (default 60000)")
    p.set_defaults(func=_run(produce))

    c = sub.add_parser("consume", help="print records (like kafka-console-consumer)")
    c.add_argument("topic")
    c.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP, help=f"HOST:PORT (default {DEFAULT_BOOTSTRAP})")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the log start (with --group: only when the group has no committed offset)")
    c.add_argument("--group", help="consume as a member of this group and commit what was printed")
    c.add_argument("--partition", type=int, help="only this partition (without --group)")
    c.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted")
    c.add_argument("--max-messages", type=_positive, help="exit after this many records")
    c.add_argument("--timeout-ms", type=_positive, help="exit after this long without a record")
    c.add_argument("--format", help="e.g. '{partition}:{offset} {key}={value} [{headers}] {timestamp}' "
                                    "(default '{value}'; \\t and \\n allowed)")
    c.add_argument("--json", action="store_true", help="one JSON object per record")
    c.set_defaults(func=_run(consume))
