"""The orders domain shared by the generator, the job and the tests: one deterministic order per
index, and the expected results, so a test can check the job's output exactly."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass

CUSTOMERS = 40
TIERS = ("gold", "silver", "bronze")
SKUS = ("apple", "bread", "cheese", "dates", "eggs", "flour", "grapes", "honey")


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    sku: str
    qty: int
    unit_price_cents: int
    ts: int  # event time, epoch milliseconds

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @property
    def amount_cents(self) -> int:
        return self.qty * self.unit_price_cents


def customer_tier(customer: str) -> str:
    """The static dimension the job joins with (a table in real life)."""
    return TIERS[int(customer[1:]) % len(TIERS)]


def customers() -> list[tuple[str, str]]:
    return [(f"c{i:03d}", customer_tier(f"c{i:03d}")) for i in range(CUSTOMERS)]


def make_order(seed: int, i: int) -> Order:
    """Order number `i` of the stream seeded `seed`: the same on every call, in every process."""
    rnd = random.Random(seed * 1_000_003 + i)
    return Order(order_id=f"o{seed}-{i:08d}", customer=f"c{rnd.randrange(CUSTOMERS):03d}",
                 sku=rnd.choice(SKUS), qty=rnd.randint(1, 9), unit_price_cents=rnd.randint(50, 5000),
                 ts=1_700_000_000_000 + i * 1000)


def expected_totals(orders: list[Order]) -> dict[str, tuple[int, int]]:
    """customer -> (number of orders, total in cents)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in orders:
        out[o.customer][0] += 1
        out[o.customer][1] += o.amount_cents
    return {c: (n, t) for c, (n, t) in out.items()}
