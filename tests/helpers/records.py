"""Test data and the round-trip checks shared by every client's compatibility test."""

from __future__ import annotations

import random
import re
import string
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_TOPIC_BAD = re.compile(r"[^a-zA-Z0-9._-]+")


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other test uses: ``<prefix>-<random hex>``, legal Kafka characters only."""
    clean = _TOPIC_BAD.sub("-", prefix).strip("-.")[:150] or "t"
    return f"{clean}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Msg:
    idx: int
    key: bytes
    value: bytes


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def make_messages(n: int, *, n_keys: int = 500, seed: int = 0, text: bool = False) -> list[Msg]:
    """``n`` keyed messages with unique values (the value starts with its index).

    Binary values carry arbitrary bytes, including NUL and bytes that are not UTF-8, with lengths from
    0 up to 300; ``text=True`` restricts to printable ASCII without separators (for the kcat CLI).
    Keys repeat (``n_keys`` distinct keys) so that key-to-partition stickiness can be checked.
    """
    rnd = random.Random(seed)
    alphabet = (string.ascii_letters + string.digits).encode()
    out = []
    for i in range(n):
        key = b"key-%05d" % rnd.randrange(n_keys)
        size = rnd.randrange(0, 301)
        if text:
            body = bytes(rnd.choice(alphabet) for _ in range(size))
        else:
            body = rnd.randbytes(size)
        out.append(Msg(i, key, b"%08d" % i + body))
    return out


def _show(items: Iterable[object], limit: int = 8) -> str:
    items = list(items)
    head = ", ".join(repr(x) for x in items[:limit])
    return f"[{head}{', ...' if len(items) > limit else ''}] ({len(items)} total)"


def verify_round_trip(
    sent: list[Msg],
    consumed: list[Consumed],
    *,
    partitions: int,
    acks: Mapping[int, tuple[int, int]] | None = None,
) -> None:
    """Assert that ``consumed`` is exactly ``sent``, as Kafka promises for one producer on one topic.

    * every message comes back once, with a byte-identical key and value, and nothing else comes back;
    * each partition's offsets are dense from 0 (no control records: not transactional);
    * within a partition, messages appear in the order they were produced;
    * every key lands in exactly one partition, within ``range(partitions)``;
    * if ``acks`` (message index -> (partition, offset) from the producer's acknowledgements) is given,
      every message is found exactly where the broker said it had put it.
    """
    by_value = {m.value: m for m in sent}
    assert len(by_value) == len(sent), "test data must have unique values"

    # 1. the same multiset, byte for byte
    counts = Counter((c.partition, c.offset) for c in consumed)
    dupe_pos = {p for p, n in counts.items() if n > 1}
    assert not dupe_pos, (
        f"the same (partition, offset) was delivered more than once: {_show(sorted(dupe_pos))}"
    )
    unknown = [c for c in consumed if c.value not in by_value]
    assert not unknown, f"consumed records that were never produced: {_show(unknown, 3)}"
    seen: dict[int, Consumed] = {}
    dupes = []
    for c in consumed:
        m = by_value[c.value]  # type: ignore[index]
        if m.idx in seen:
            dupes.append((m.idx, seen[m.idx], c))
        seen[m.idx] = c
    assert not dupes, f"messages consumed more than once (duplicated by the broker): {_show(dupes, 3)}"
    missing = [m.idx for m in sent if m.idx not in seen]
    assert not missing, f"{len(missing)} of {len(sent)} produced messages were not consumed: {_show(missing)}"
    assert len(consumed) == len(sent)
    wrong_keys = [(m.idx, m.key, seen[m.idx].key) for m in sent if seen[m.idx].key != m.key]
    assert not wrong_keys, f"keys changed in transit (idx, sent, consumed): {_show(wrong_keys, 3)}"

    # 2. partitions in range, offsets dense from zero
    per_part: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        per_part[c.partition].append(c)
    bad_parts = sorted(set(per_part) - set(range(partitions)))
    assert not bad_parts, f"records from partitions outside 0..{partitions - 1}: {bad_parts}"
    for p, recs in sorted(per_part.items()):
        offsets = sorted(c.offset for c in recs)
        assert offsets == list(range(len(recs))), (
            f"partition {p}: offsets are not dense from 0: {_show(offsets)}"
        )

    # 3. per-partition order equals production order
    for p, recs in sorted(per_part.items()):
        idxs = [by_value[c.value].idx for c in sorted(recs, key=lambda c: c.offset)]  # type: ignore[index]
        bad = [(a, b) for a, b in zip(idxs, idxs[1:], strict=False) if b < a]
        assert not bad, f"partition {p}: records out of production order (idx pairs): {_show(bad)}"

    # 4. key stickiness
    key_parts: dict[bytes, set[int]] = defaultdict(set)
    for m in sent:
        key_parts[m.key].add(seen[m.idx].partition)
    spread = {k: sorted(v) for k, v in key_parts.items() if len(v) > 1}
    assert not spread, f"keys found in more than one partition: {_show(sorted(spread.items()), 4)}"

    # 5. acknowledged positions
    if acks is not None:
        assert set(acks) == {m.idx for m in sent}, "every sent message must have an acknowledgement"
        moved = [
            (i, acks[i], (seen[i].partition, seen[i].offset))
            for i in sorted(acks)
            if acks[i] != (seen[i].partition, seen[i].offset)
        ]
        assert not moved, (
            f"records not at the acknowledged (partition, offset) (idx, ack, found): {_show(moved, 4)}"
        )
