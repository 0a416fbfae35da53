"""Feed the orders job: deterministic orders, produced in transactions, some of them aborted.

    python -m pipeline.jobs.generate_orders --bootstrap localhost:9092 --count 10000

Orders i = start..start+count-1 (see model.make_order) are committed in transactions of
`--txn-size`; with `--abort-every K`, every K-th transaction is first written with junk orders and
aborted, so a read_committed reader that let aborted data through would be caught.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from client import Admin, Producer, TopicAlreadyExistsError

from .model import Order, make_order

TOPICS = {"orders": "orders", "enriched": "orders-enriched", "totals": "customer-totals"}


async def ensure_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        for name in names:
            try:
                await admin.create_topic(name, partitions)
            except TopicAlreadyExistsError:
                pass


async def _one_transaction(p: Producer, topic: str, orders: list[Order], commit: bool) -> None:
    await p.begin_transaction()
    for o in orders:
        await p.send(topic, o.to_json(), key=o.customer.encode())
    if commit:
        await p.commit_transaction()
    else:
        await p.flush()  # put the junk in the log: abort alone drops what is unsent
        await p.abort_transaction()


async def generate(bootstrap: str, topic: str, *, seed: int, start: int, count: int, txn_size: int,
                   abort_every: int, txn_id: str) -> int:
    """Commit orders start..start+count-1; returns the number of aborted transactions written."""
    aborted = 0
    n_txn = 0
    i = start
    async with Producer(bootstrap, transactional_id=txn_id, linger_ms=5, batch_size=262_144) as p:
        await p.init_transactions()
        while i < start + count:
            n_txn += 1
            if abort_every and n_txn % abort_every == 0:
                junk = [make_order(seed + 7919, j) for j in range(i, i + txn_size)]
                await _one_transaction(p, topic, junk, commit=False)
                aborted += 1
            batch = [make_order(seed, j) for j in range(i, min(i + txn_size, start + count))]
            await _one_transaction(p, topic, batch, commit=True)
            i += len(batch)
    return aborted


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="localhost:9092")
    ap.add_argument("--topic", default=TOPICS["orders"])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--txn-size", type=int, default=500)
    ap.add_argument("--abort-every", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=2, help="for topics this creates")
    ap.add_argument("--transactional-id", default="orders-generator")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    asyncio.run(ensure_topics(args.bootstrap, [args.topic, TOPICS["enriched"], TOPICS["totals"]], args.partitions))
    aborted = asyncio.run(generate(args.bootstrap, args.topic, seed=args.seed, start=args.start, count=args.count,
                                   txn_size=args.txn_size, abort_every=args.abort_every,
                                   txn_id=args.transactional_id))
    dt = time.perf_counter() - t0
    print(f"committed {args.count} orders to {args.topic} ({aborted} aborted transactions interleaved) "
          f"in {dt:.1f}s")


if __name__ == "__main__":
    main()
