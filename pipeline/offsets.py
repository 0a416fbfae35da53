"""Offsets per partition: their JSON form in Spark's checkpoint, offset specs, and trigger limits.

Pure functions, no I/O: the source resolves "earliest"/"latest" with the broker and then only
does arithmetic here. The JSON form is Spark's Kafka one, `{"topic": {"0": 42, "1": 7}}`, so a
checkpoint is readable by anyone who knows that format, and a spec like
`startingOffsets={"orders": {"0": -2, "1": 100}}` means the same as in Spark (-2 earliest, -1 latest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from client import TopicPartition

EARLIEST = -2
LATEST = -1

Offsets = dict[TopicPartition, int]


class OffsetSpecError(ValueError):
    """A startingOffsets/endingOffsets value is neither earliest, latest nor well-formed JSON."""


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form. Keys are strings because Spark stores offsets as JSON objects."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def from_json_dict(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    try:
        return {TopicPartition(str(t), int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}
    except (AttributeError, TypeError, ValueError):
        raise OffsetSpecError(f"not a per-partition offset map: {data!r}") from None


def parse_spec(spec: str) -> str | Offsets:
    """'earliest', 'latest', or explicit offsets per partition (which may use -2/-1)."""
    s = spec.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    try:
        data = json.loads(s)
    except ValueError:
        raise OffsetSpecError(f"offsets must be earliest, latest or JSON like {{\"t\": {{\"0\": 5}}}}, "
                              f"not {spec!r}") from None
    if not isinstance(data, dict):
        raise OffsetSpecError(f"offsets JSON must be an object, not {spec!r}")
    offsets = from_json_dict(data)
    bad = {tp: o for tp, o in offsets.items() if o < EARLIEST}
    if bad:
        raise OffsetSpecError(f"offsets below -2 mean nothing: {bad}")
    return offsets


def resolve(spec: str | Offsets, tps: Iterable[TopicPartition], earliest: Mapping[TopicPartition, int],
            latest: Mapping[TopicPartition, int]) -> Offsets:
    """Concrete offsets for `tps`. A partition a JSON spec does not name starts at its earliest
    offset (it is taken to be new, as Spark's Kafka source does); an explicit offset is clamped into
    the partition's current range, so a spec written before retention kicked in still works."""
    out: Offsets = {}
    for tp in tps:
        if spec == "earliest":
            out[tp] = earliest[tp]
        elif spec == "latest":
            out[tp] = latest[tp]
        else:
            assert isinstance(spec, dict)
            o = spec.get(tp, EARLIEST)
            if o == EARLIEST:
                out[tp] = earliest[tp]
            elif o == LATEST:
                out[tp] = latest[tp]
            else:
                out[tp] = min(max(o, earliest[tp]), latest[tp])
    return out


def cap(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_offsets: int) -> Offsets:
    """Move from `start` towards `end` by at most `max_offsets` offsets in total.

    Each partition gets a share proportional to its backlog (rounded down), then what rounding
    left is handed out one offset at a time in partition order, so the total is exactly
    min(max_offsets, backlog) and a trigger always progresses while there is a backlog.
    Partitions in `end` but not in `start` (new ones) start at offset 0 of their backlog.
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(end)
    share = {tp: (n * max_offsets) // total for tp, n in backlog.items()}
    left = max_offsets - sum(share.values())
    for tp in sorted(backlog):
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start.get(tp, end[tp]) + share[tp] for tp in end}
