"""The chaos suite's judge: reads a workload history after the fact and names every anomaly in it.

The workload (helpers.chaos.workload) only records what its clients saw; deciding what is wrong
happens here, offline, so a history from a failed campaign can be re-judged (and the checker itself
tested) without a cluster: ``python -m tests.chaos.check HISTORY [--json OUT]``.

History format: JSON lines, one operation per line, each with ``"f"`` naming its kind. Lines are
numbered from 1 in file order and anomalies cite operations by line number. Kinds the checker does
not know (``meta`` aside, e.g. ``nemesis`` or ``note``) are carried along and otherwise ignored.

* ``meta``: ``topic`` (the mixed workload's topic) and ``copier`` ``{"input", "output"}`` topics.
* ``send``: one idempotent acks=all produce: ``proc``, ``inc`` (producer incarnation), ``seq``
  (produce() order within the incarnation), ``topic``, ``partition``, ``value``, ``status``
  (``ok`` acknowledged, ``info`` unknown) and ``offset`` (null unless acknowledged).
* ``txn``: one producer transaction: ``proc``, ``inc``, ``seq``, ``topic``, ``sends``
  (``[{"partition", "value", "offset"}]`` in produce() order, offset from the delivery report or
  null), ``outcome`` (``commit``, ``abort`` or ``info`` = unknown) and ``tc`` (monotonic time just
  before commit/abort was invoked, null if never).
* ``poll``: one consume() of a consumer that assigned every partition from the beginning when its
  incarnation started: ``proc``, ``inc``, ``iso``, ``topic``, ``recs`` (``[[partition, offset,
  value]]`` in the order returned), ``t0``, ``t1``.
* ``final-read``: after healing, a fresh consumer's read of the whole topic: ``iso``, ``topic``,
  ``recs``, ``ends`` (partition -> high watermark) and ``complete``.
* ``offsets``: ``topic``, ``partition``, ``hw``, ``lso`` once transactions had time to time out.
* ``hanging``: ``txns``, what find-hanging reported.
* ``copier``: one consume-transform-produce pipeline: ``output_topic``, ``input`` (its input
  partitions as read after the faults, ``[[partition, offset, value]]``), ``group_offsets``
  (partition -> the offset its consumer group committed, as the broker answered at the end: input
  below it must be in the output exactly once, input from it on not at all),
  ``committed``/``aborted``/``unknown`` transaction numbers; it writes ``t<txn>|<input value>``.
  Polls of its output topic are its verifier.
* ``batches``: who wrote each stored batch of ``topic`` (read from a replica's segment files after
  the run): ``partitions`` -> partition -> ``{"node", "batches": [[base offset, last offset,
  producer id, producer epoch, base sequence]]}`` — what tells a broker's duplicate from a client's.
* ``fence``: a zombie: transactional id ``tid``'s producer ``pid`` at ``epoch`` was fenced when
  another instance's InitProducerId answered epoch ``by`` (at monotonic ``t``), and went on anyway:
  ``writes`` (``[{"partition", "value", "t0", "error", "offset"}]``, each sent under the old epoch
  after ``t``, straight to the partition leader; ``error`` ``NONE`` means acknowledged) and
  ``commit`` (the error its EndTxn(commit) under the old epoch got after ``t``, null if unanswered).
* ``stall``: a copier made no progress for the workload's STALL_S: ``pipeline``, ``since`` and ``t``
  (monotonic times of its last progress and of the report), ``summary``.
* ``bump``: an idempotent producer bumped its epoch: ``proc``, ``inc``, ``t``, ``what`` (the client's
  own log line: the ``PID{Id:N,Epoch:E}`` it bumps from, and its reason; a line without the PID
  explains no copy).

Values are unique per topic, so a value identifies the operation that wrote it. Every timestamp
comes from one process's time.monotonic(), so times of different operations compare.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ANOMALIES",
    "CLIENT_FINDINGS",
    "Anomaly",
    "Evidence",
    "HistoryError",
    "Op",
    "Report",
    "abbreviate",
    "check",
    "load",
    "main",
    "parse",
]

ANOMALIES: dict[str, str] = {
    "lost-write": "an acknowledged send or committed transaction's value is missing from the read_committed "
    "final-read, which was complete or got past the value's offset",
    "unseen": "an acknowledged or committed value was never read at all, and the read_committed final-read "
    "was incomplete and stopped before its offset",
    "duplicate": "one value at two or more (partition, offset) positions across acks, polls and final-reads, "
    "unless the history shows it is a client re-send (epoch-resend)",
    "aborted-read": "a read_committed poll or final-read returned a value written by a transaction known "
    "to be aborted (mixed producers or copier)",
    "precommitted-read": "a read_committed poll returned a value of a not-aborted transaction before that "
    "transaction's commit was invoked",
    "inconsistent-offsets": "one (topic, partition, offset) holds different values across acks, polls and "
    "final-reads",
    "nonmonotonic-send": "a producer incarnation's acknowledged offsets on a partition did not strictly "
    "increase in produce() order, between two operations",
    "int-nonmonotonic-send": "as nonmonotonic-send, between two sends of one transaction",
    "nonmonotonic-poll": "a consumer incarnation's offsets on a partition did not strictly increase from "
    "one poll to a later one",
    "int-nonmonotonic-poll": "as nonmonotonic-poll, within one poll",
    "poll-skip": "a consumer incarnation moved from one offset to a later one on a partition (across polls) "
    "past a record its isolation level should have shown, per the final-read",
    "int-poll-skip": "as poll-skip, within one poll",
    "hanging-txn": "after healing and the transaction timeout, a partition's last stable offset was below its "
    "high watermark, or find-hanging reported an open transaction",
    "copier-lost": "a copier input value below its group's committed offset is missing from the committed "
    "output (read_committed final-read)",
    "copier-duplicate": "a copier input value appears more than once in the committed output, or twice to one "
    "read_committed verifier incarnation, or in the output at or past its group's committed offset (a "
    "restarted copier would copy it again)",
    "fenced-write": "after another instance of its transactional id was handed a newer producer epoch, a "
    "write under the old epoch was acknowledged or read back (stored), or its commit was answered as done",
    "stall": "a copier made no progress (no transaction attempt, rewind or new client) for the workload's "
    "STALL_S, longer than any fault's hold plus the client's own timeouts: a client call stuck past its timeout",
    "incomplete-history": "something a check needs (a final-read, a copier line, an offset) is missing from "
    "the history, so that check could not be made",
}

# Findings the history shows are the client's doing: reported, not counted as anomalies.
CLIENT_FINDINGS: dict[str, str] = {
    "epoch-resend": "one plain idempotent send's value at two or more positions, stored by one producer id under "
    "as many epochs, at most one copy visible at read_committed, and every bump of that producer between the "
    "copies' epochs recorded with a message timeout as its reason: librdkafka re-sent a possibly stored batch "
    "after bumping its epoch (KIP-360), which no broker can recognise as a retry",
}

RC, RU = "read_committed", "read_uncommitted"
# librdkafka's bump line names the PID it bumps from ("... for PID{Id:7,Epoch:0} epoch bump ... :
# <reason>"); its own message timeout gives the reason "N message(s) timed out on <topic> [<p>]"
BUMP_PID = re.compile(r"PID\{Id:(?P<id>-?\d+),Epoch:(?P<epoch>-?\d+)\}")
TIMED_OUT = "message(s) timed out"
ABBREVIATE_TO = 10  # list entries kept in an evidence op: enough context, still one screen
JSON_EXAMPLES = 1000  # per kind in to_json(): a broken build can produce 10^5 of one kind
RENDER_EXAMPLES = 3
# which list in an op a record index points into
_RECORDS_OF = {"poll": "recs", "final-read": "recs", "txn": "sends", "hanging": "txns", "copier": "input",
               "fence": "writes"}


class HistoryError(ValueError):
    """The history cannot be judged (unreadable, malformed, or contradicting its own premises): a
    verdict on it would be meaningless, so it is refused rather than reported as clean."""


@dataclass(frozen=True, slots=True)
class Op:
    """One history line, kept whole: anomalies quote it and unknown kinds pass through untouched."""

    line: int
    data: dict[str, Any]

    @property
    def f(self) -> str:
        return str(self.data["f"])


@dataclass(frozen=True, slots=True)
class Evidence:
    """An operation as cited by an anomaly: its line, and the op with long lists cut down to the
    entries that matter, so a report stays readable when polls carry thousands of records."""

    line: int
    op: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "op": self.op}


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One finding, self-contained so a reader can verify it from the evidence alone, without
    re-running the checker or opening a multi-gigabyte history."""

    kind: str
    explanation: str
    evidence: tuple[Evidence, ...] = ()

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(e.line for e in self.evidence)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "explanation": self.explanation,
                "evidence": [e.to_json() for e in self.evidence]}


@dataclass
class Report:
    """The verdict. The counts are part of it: "no anomalies" in a history with no commits or no
    reads proves nothing, and callers check for that."""

    anomalies: dict[str, list[Anomaly]] = field(default_factory=dict)
    # flat, so callers can ask for one number: "ops" (all lines), one per op kind ("send", "poll",
    # "nemesis", ...), "send-ok"/"send-info", "txn-commit"/"txn-abort"/"txn-info", "txn-values",
    # "poll-records", "final-read-records" and "records-read" (the two together)
    counts: dict[str, int] = field(default_factory=dict)
    client: dict[str, list[Anomaly]] = field(default_factory=dict)  # CLIENT_FINDINGS kinds

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    @property
    def op_kinds(self) -> list[str]:
        """The op kinds among the counts (the other keys are derived tallies)."""
        derived = ("send-", "txn-", "poll-records", "final-read-records", "records-read")
        return [k for k in self.counts if k != "ops" and not k.startswith(derived)]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "counts": self.counts,
            "anomaly_counts": {k: len(v) for k, v in self.anomalies.items()},
            "anomalies": {k: [a.to_json() for a in v[:JSON_EXAMPLES]] for k, v in self.anomalies.items()},
            "definitions": {k: ANOMALIES[k] for k in self.anomalies},
            "client_finding_counts": {k: len(v) for k, v in self.client.items()},
            "client_findings": {k: [a.to_json() for a in v[:JSON_EXAMPLES]] for k, v in self.client.items()},
        }

    def render(self) -> str:
        c = self.counts
        kinds = {k: v for k, v in c.items() if k != "ops" and k in self.op_kinds}
        lines = [f"operations: {c.get('ops', 0)} ({_pairs(kinds)})"]
        for title, prefix in (("sends", "send-"), ("txns", "txn-")):
            part = {k.removeprefix(prefix): v for k, v in c.items() if k.startswith(prefix)}
            if any(part.values()):
                lines.append(f"{title}: {_pairs(part)}")
        lines.append(f"reads: {c.get('poll', 0)} polls, {c.get('poll-records', 0)} records; "
                     f"{c.get('final-read', 0)} final-reads, {c.get('final-read-records', 0)} records")
        if self.client:
            lines.append(f"client findings (not anomalies): {_pairs({k: len(v) for k, v in self.client.items()})}")
        if self.ok:
            lines.append("anomalies: none")
        else:
            total = sum(len(v) for v in self.anomalies.values())
            lines.append(f"anomalies: {total} ({_pairs({k: len(v) for k, v in self.anomalies.items()})})")
        for kind, found in [*self.anomalies.items(), *self.client.items()]:
            lines.append("")
            lines.append(f"{kind} x{len(found)}: {ANOMALIES.get(kind) or CLIENT_FINDINGS.get(kind, '')}")
            for a in found[:RENDER_EXAMPLES]:
                lines.append(f"  - {a.explanation}")
                for e in a.evidence:
                    lines.append(f"      line {e.line}: {json.dumps(e.op, separators=(',', ':'))}")
            if len(found) > RENDER_EXAMPLES:
                lines.append(f"  ... and {len(found) - RENDER_EXAMPLES} more")
        return "\n".join(lines)


def _pairs(d: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


# ----------------------------------------------------------------------------------------- loading


def load(path: str | Path) -> list[Op]:
    """Parse and validate up front, so that the checks can trust field types and a malformed history
    is refused with its line number instead of failing half-way with a KeyError."""
    try:
        with Path(path).open(encoding="utf-8") as f:
            return parse(f, str(path))
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{path}: not UTF-8 text ({exc.reason})") from None


def parse(lines: Iterable[str], source: str = "history") -> list[Op]:
    """`load` of lines already in memory (the simulator keeps its history there)."""
    ops: list[Op] = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"{source}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("f"), str):
            raise HistoryError(f"{source}:{n}: not an operation (an object with a string \"f\")")
        problem = _invalid(data)
        if problem:
            raise HistoryError(f"{source}:{n}: {data['f']}: {problem}")
        ops.append(Op(n, data))
    return ops


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _opt_int(x: object) -> bool:
    return x is None or _is_int(x)


_FIELDS: dict[str, dict[str, Any]] = {
    "send": {"proc": str, "inc": _is_int, "seq": _is_int, "topic": str, "partition": _is_int,
             "value": str, "status": ("ok", "info")},
    "txn": {"proc": str, "inc": _is_int, "seq": _is_int, "topic": str, "sends": list,
            "outcome": ("commit", "abort", "info")},
    "poll": {"proc": str, "inc": _is_int, "iso": (RC, RU), "topic": str, "recs": list, "t1": _is_num},
    "final-read": {"iso": (RC, RU), "topic": str, "recs": list, "complete": bool},
    "offsets": {"topic": str, "partition": _is_int, "hw": _is_int, "lso": _is_int},
    "hanging": {"txns": list},
    "batches": {"topic": str, "partitions": dict},
    "bump": {"proc": str, "inc": _is_int, "what": str},
    "fence": {"proc": str, "topic": str, "pid": _is_int, "epoch": _is_int, "by": _is_int, "t": _is_num,
              "writes": list},
    "copier": {"output_topic": str, "input": list, "group_offsets": dict, "committed": list, "aborted": list},
    "stall": {"pipeline": str, "since": _is_num, "t": _is_num},
}


def _invalid(d: dict[str, Any]) -> str | None:
    """What is wrong with an operation of a known kind, or None."""
    spec = _FIELDS.get(d["f"])
    if spec is None:
        return None
    for name, want in spec.items():
        if name not in d:
            return f"missing {name!r}"
        v = d[name]
        good = (v in want) if isinstance(want, tuple) else isinstance(v, want) if isinstance(want, type) else want(v)
        if not good:
            return f"bad {name!r}: {v!r}"
    f = d["f"]
    if f == "send" and not _opt_int(d.get("offset")):
        return f"bad 'offset': {d.get('offset')!r}"
    if f == "txn":
        if not (d.get("tc") is None or _is_num(d.get("tc"))):
            return f"bad 'tc': {d.get('tc')!r}"
        for s in d["sends"]:
            if not (isinstance(s, dict) and _is_int(s.get("partition")) and isinstance(s.get("value"), str)
                    and _opt_int(s.get("offset"))):
                return f"bad send {s!r}"
    if f == "fence":
        if not (d.get("commit") is None or isinstance(d.get("commit"), str)):
            return f"bad 'commit': {d.get('commit')!r}"
        for w in d["writes"]:
            if not (isinstance(w, dict) and _is_int(w.get("partition")) and isinstance(w.get("value"), str)
                    and isinstance(w.get("error"), str) and _opt_int(w.get("offset"))):
                return f"bad write {w!r}"
    if f in ("poll", "final-read"):
        for r in d["recs"]:
            if not (isinstance(r, list) and len(r) == 3 and _is_int(r[0]) and _is_int(r[1])
                    and isinstance(r[2], str)):
                return f"bad record {r!r}"
    if f == "final-read" and not (isinstance(d.get("ends", {}), dict)):
        return f"bad 'ends': {d.get('ends')!r}"
    if f == "batches":
        for p, entry in d["partitions"].items():
            rows = entry.get("batches") if isinstance(entry, dict) else None
            if not (p.isdigit() and isinstance(rows, list)
                    and all(isinstance(r, list) and len(r) == 5 and all(_is_int(x) for x in r) for r in rows)):
                return f"bad batches of partition {p!r}"
    if f == "copier":
        for r in d["input"]:
            if not (isinstance(r, list) and len(r) == 3 and _is_int(r[0]) and _is_int(r[1])
                    and isinstance(r[2], str)):
                return f"bad input record {r!r}"
        if not all(_is_int(o) for o in d["group_offsets"].values()):
            return "'group_offsets' must hold offsets"
        if {str(r[0]) for r in d["input"]} - set(d["group_offsets"]):
            return "'group_offsets' lacks a partition of 'input'"
        for name in ("committed", "aborted", "unknown"):
            if not all(_is_int(v) for v in d.get(name, [])):
                return f"{name!r} must hold transaction numbers"
    return None


# ------------------------------------------------------------------------------------ abbreviation


def abbreviate(op: Mapping[str, Any], focus: Mapping[str, Iterable[int]] | None = None,
               limit: int = ABBREVIATE_TO) -> dict[str, Any]:
    """A shallow copy of `op` whose long lists keep only `limit` entries, clustered around the
    `focus` indices of each list (the head when none), with the gaps marked: the evidence must show
    the records in question and their neighbours, not 500 unrelated ones."""
    focus = focus or {}
    out: dict[str, Any] = {}
    for k, v in op.items():
        out[k] = _cut(v, sorted(set(focus.get(k, ()))), limit) if isinstance(v, list) and len(v) > limit else v
    return out


def _cut(items: Sequence[Any], focus: Sequence[int], limit: int) -> list[Any]:
    n = len(items)
    centres = [i for i in focus if 0 <= i < n][:limit] or [0]
    keep = set(centres)
    radius = 1
    while len(keep) < limit and radius < n:
        for c in centres:
            for i in (c - radius, c + radius):
                if 0 <= i < n and len(keep) < limit:
                    keep.add(i)
        radius += 1
    out: list[Any] = []
    prev = -1
    for i in sorted(keep):
        if i - prev > 1:
            out.append(f"...({i - prev - 1} more)")
        out.append(items[i])
        prev = i
    if prev < n - 1:
        out.append(f"...({n - 1 - prev} more)")
    return out


# ---------------------------------------------------------------------------------------- checking


@dataclass(slots=True)
class _Write:
    """A value as its writer saw it; `index` is its place in the txn op's sends (-1: a plain send)."""

    topic: str
    value: str
    partition: int
    offset: int | None
    line: int
    index: int
    proc: str
    inc: int
    seq: int
    acked: bool  # status ok, or in a committed transaction: must be durable
    outcome: str | None  # the transaction's, None for a plain send
    tc: float | None


@dataclass(slots=True)
class _Final:
    """A final-read indexed for the questions asked of it: which values, how far, which offsets."""

    op: Op
    values: set[str]
    reached: dict[int, int]  # partition -> highest offset read
    offsets: dict[int, list[int]]  # partition -> sorted offsets read
    indices: dict[int, list[int]]  # partition -> rec index of each of those offsets


Witness = tuple[int, int]  # (line, index in the op's list; -1 for the op as a whole)


def check(ops: Sequence[Op]) -> Report:
    """Judge a loaded history (see the module docstring for what each anomaly means)."""
    return _Checker(ops).run()


class _Checker:
    """One pass per question over indexes built once: histories hold ~10^6 records, so every check
    is a dict/set lookup or a bisect per record, never a scan of all offsets."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = list(ops)
        self.by_line = {op.line: op for op in self.ops}
        self.found: dict[str, list[Anomaly]] = defaultdict(list)
        kinds: dict[str, list[Op]] = defaultdict(list)
        for op in self.ops:
            kinds[op.f].append(op)
        self.kinds = kinds
        self.writes: dict[tuple[str, str], _Write] = {}
        # (topic, partition) -> offset -> (value, line, index): the first value seen at each position
        self.at: dict[tuple[str, int], dict[int, tuple[str, int, int]]] = defaultdict(dict)
        self.clash: dict[tuple[str, int, int], dict[str, Witness]] = {}
        # topic -> value -> (partition, offset, line, index): the first position seen of each value
        self.where: dict[str, dict[str, tuple[int, int, int, int]]] = defaultdict(dict)
        self.twice: dict[tuple[str, str], dict[tuple[int, int], Witness]] = {}
        self.seen: dict[str, set[str]] = defaultdict(set)  # values any poll or final-read returned
        self.finals: dict[tuple[str, str], _Final] = {}
        # copier output topic -> txn number -> (copier line, index in its "aborted")
        self.copier_aborted: dict[str, dict[int, Witness]] = defaultdict(dict)
        self.copier_of: dict[str, dict[str, Witness]] = defaultdict(dict)  # topic -> input -> copier
        self.mixed_topics: set[str] = set()
        self.copier_topics: set[str] = set()
        self.meta_line: int | None = None
        # (topic, partition) -> (base offsets, [base, last, producer id, epoch, sequence] rows)
        self.batches: dict[tuple[str, int], tuple[list[int], list[list[int]]]] = {}
        # (producer id, epoch bumped from) -> [(line, librdkafka's log line with its reason)]
        self.bumps: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)

    # ------------------------------------------------------------------------------------ plumbing

    def report(self, kind: str, explanation: str, witnesses: Iterable[Witness] = (),
               focus: Mapping[int, Mapping[str, Iterable[int]]] | None = None) -> None:
        """Record an anomaly; witnesses of one line are merged into one piece of evidence focused on
        all their indices (`focus` adds indices into other lists of an op, e.g. a copier's aborted)."""
        assert kind in ANOMALIES or kind in CLIENT_FINDINGS, kind
        order: dict[int, dict[str, list[int]]] = {}
        for line, idx in witnesses:
            spots = order.setdefault(line, defaultdict(list))
            if idx >= 0:
                spots[_RECORDS_OF.get(self.by_line[line].f, "")].append(idx)
        for line, extra in (focus or {}).items():
            spots = order.setdefault(line, defaultdict(list))
            for key, idxs in extra.items():
                spots[key].extend(idxs)
        ev = tuple(Evidence(line, abbreviate(self.by_line[line].data, spots)) for line, spots in order.items())
        self.found[kind].append(Anomaly(kind, explanation, ev))

    def run(self) -> Report:
        self.index_meta()
        self.index_writes()
        self.index_finals()
        self.index_copiers()
        self.index_batches()
        self.scan_acks()
        self.scan_polls()
        self.scan_finals()
        self.check_positions()
        self.check_sends()
        self.check_durability()
        self.check_copiers()
        self.check_fences()
        self.check_hanging()
        self.check_stalls()
        self.check_presence()
        found = {k: sorted(v, key=lambda a: a.lines[:1] or (0,)) for k, v in self.found.items() if v}
        return Report({k: found[k] for k in ANOMALIES if k in found}, self.counts(),
                      {k: found[k] for k in CLIENT_FINDINGS if k in found})

    def counts(self) -> dict[str, int]:
        sends = Counter(str(op.data["status"]) for op in self.kinds.get("send", []))
        txns = Counter(str(op.data["outcome"]) for op in self.kinds.get("txn", []))
        polled = sum(len(op.data["recs"]) for op in self.kinds.get("poll", []))
        final = sum(len(op.data["recs"]) for op in self.kinds.get("final-read", []))
        return {
            "ops": len(self.ops),
            **{f: len(ops) for f, ops in self.kinds.items()},
            "send-ok": sends["ok"], "send-info": sends["info"],
            "txn-commit": txns["commit"], "txn-abort": txns["abort"], "txn-info": txns["info"],
            "txn-values": sum(len(op.data["sends"]) for op in self.kinds.get("txn", [])),
            "poll-records": polled, "final-read-records": final, "records-read": polled + final,
        }

    # ------------------------------------------------------------------------------------ indexing

    def index_batches(self) -> None:
        for op in self.kinds.get("bump", []):
            pid = BUMP_PID.search(op.data["what"])
            if pid is not None:  # a bump the history cannot place explains no copy
                self.bumps[(int(pid["id"]), int(pid["epoch"]))].append((op.line, op.data["what"]))
        for op in self.kinds.get("batches", []):
            for p, entry in op.data["partitions"].items():
                rows = sorted(entry["batches"])
                self.batches[(op.data["topic"], int(p))] = ([r[0] for r in rows], rows)

    def batch_at(self, topic: str, p: int, o: int) -> list[int] | None:
        """The stored batch holding offset `o`, if the history has the batches of that partition."""
        bases, rows = self.batches.get((topic, p), ([], []))
        k = bisect_right(bases, o) - 1
        return rows[k] if k >= 0 and rows[k][1] >= o else None

    def index_meta(self) -> None:
        for op in self.kinds.get("meta", []):
            self.meta_line = self.meta_line or op.line
            if isinstance(op.data.get("topic"), str):
                self.mixed_topics.add(op.data["topic"])
            copier = op.data.get("copier")
            if isinstance(copier, dict) and isinstance(copier.get("output"), str):
                self.copier_topics.add(copier["output"])

    def index_writes(self) -> None:
        def add(w: _Write) -> None:
            key = (w.topic, w.value)
            if key in self.writes:
                raise HistoryError(f"line {w.line}: value {w.value!r} of {w.topic} was already written at line "
                                   f"{self.writes[key].line}; values must be unique per topic")
            self.writes[key] = w

        for op in self.kinds.get("send", []):
            d = op.data
            self.mixed_topics.add(d["topic"])
            add(_Write(d["topic"], d["value"], d["partition"], d.get("offset"), op.line, -1, d["proc"], d["inc"],
                       d["seq"], d["status"] == "ok", None, None))
        for op in self.kinds.get("txn", []):
            d = op.data
            self.mixed_topics.add(d["topic"])
            for i, s in enumerate(d["sends"]):
                add(_Write(d["topic"], s["value"], s["partition"], s.get("offset"), op.line, i, d["proc"],
                           d["inc"], d["seq"], d["outcome"] == "commit", d["outcome"], d.get("tc")))

    def index_finals(self) -> None:
        """The last final-read per (topic, isolation) is the reference: a re-run would supersede."""
        for op in self.kinds.get("final-read", []):
            offsets: dict[int, list[tuple[int, int]]] = defaultdict(list)
            reached: dict[int, int] = {}
            values: set[str] = set()
            for i, (p, o, v) in enumerate(op.data["recs"]):
                offsets[p].append((o, i))
                values.add(v)
                if o > reached.get(p, -1):
                    reached[p] = o
            for pairs in offsets.values():
                pairs.sort()
            self.finals[(op.data["topic"], op.data["iso"])] = _Final(
                op, values, reached, {p: [o for o, _ in ps] for p, ps in offsets.items()},
                {p: [i for _, i in ps] for p, ps in offsets.items()})

    def index_copiers(self) -> None:
        for op in self.kinds.get("copier", []):
            topic = op.data["output_topic"]
            self.copier_topics.add(topic)
            for i, no in enumerate(op.data["aborted"]):
                self.copier_aborted[topic][no] = (op.line, i)
            for i, (_, _, v) in enumerate(op.data["input"]):
                self.copier_of[topic].setdefault(v, (op.line, i))

    # ------------------------------------------------------------------------- positions and reads

    def place(self, topic: str, p: int, o: int, v: str, line: int, idx: int) -> None:
        """Note that `v` was at (p, o), remembering one witness per distinct value of a position and
        per distinct position of a value: enough evidence for inconsistent-offsets and duplicate."""
        slot = self.at[(topic, p)]
        first = slot.get(o)
        if first is None:
            slot[o] = (v, line, idx)
        elif first[0] != v:
            self.clash.setdefault((topic, p, o), {first[0]: (first[1], first[2])}).setdefault(v, (line, idx))
        there = self.where[topic].get(v)
        if there is None:
            self.where[topic][v] = (p, o, line, idx)
        elif (there[0], there[1]) != (p, o):
            self.twice.setdefault((topic, v), {(there[0], there[1]): (there[2], there[3])}).setdefault(
                (p, o), (line, idx))

    def scan_acks(self) -> None:
        for w in self.writes.values():
            if w.offset is not None and (w.acked or w.outcome is not None):
                self.place(w.topic, w.partition, w.offset, w.value, w.line, w.index)

    def scan_polls(self) -> None:
        """Polls in file order: one consumer thread writes its polls in the order it made them."""
        last: dict[tuple[str, str, int, int], tuple[int, int, int]] = {}  # consumer, partition -> offset, line, idx
        verifier_saw: dict[tuple[str, str, int], dict[str, dict[tuple[int, int], Witness]]] = defaultdict(dict)
        for op in self.kinds.get("poll", []):
            d = op.data
            topic, iso, proc, inc = d["topic"], d["iso"], d["proc"], d["inc"]
            final = self.finals.get((topic, iso))
            who = f"{proc}/{inc}"
            for i, (p, o, v) in enumerate(d["recs"]):
                self.place(topic, p, o, v, op.line, i)
                self.seen[topic].add(v)
                key = (topic, proc, inc, p)
                prev = last.get(key)
                last[key] = (o, op.line, i)
                if prev is None:
                    continue
                po, pline, pidx = prev
                inner = pline == op.line
                if o <= po:
                    self.report("int-nonmonotonic-poll" if inner else "nonmonotonic-poll",
                                f"{iso} consumer {who} on {topic}/{p}: offset {po} then {o}",
                                [(pline, pidx), (op.line, i)])
                elif final is not None and o > po + 1:
                    self.skip(final, who, topic, p, po, o, (pline, pidx), (op.line, i))
            if iso == RC:
                self.rc_read(op, "poll")
                if topic in self.copier_topics:
                    self.verifier(op, verifier_saw[(topic, proc, inc)])

    def skip(self, final: _Final, who: str, topic: str, p: int, po: int, o: int, a: Witness, b: Witness) -> None:
        offs = final.offsets.get(p, [])
        lo, hi = bisect_right(offs, po), bisect_left(offs, o)
        if hi <= lo:
            return
        missed = offs[lo:hi]
        shown = ", ".join(map(str, missed[:5])) + (", ..." if len(missed) > 5 else "")
        self.report("int-poll-skip" if a[0] == b[0] else "poll-skip",
                    f"{final.op.data['iso']} consumer {who} on {topic}/{p} went from offset {po} to {o}, "
                    f"skipping {len(missed)} record(s) the final-read has at {shown}",
                    [a, b], {final.op.line: {"recs": final.indices[p][lo:min(hi, lo + 5)]}})

    def rc_read(self, op: Op, what: str) -> None:
        """aborted-read and precommitted-read for one read_committed read, one anomaly per
        (read, transaction) so a read of a whole aborted transaction is one finding, not four."""
        d = op.data
        topic = d["topic"]
        aborted: dict[int, list[int]] = defaultdict(list)  # txn line -> rec indices
        early: dict[int, list[int]] = defaultdict(list)
        copier_aborted = self.copier_aborted.get(topic, {})
        copier_hits: dict[int, list[int]] = defaultdict(list)  # copier line -> rec indices
        copier_txns: dict[int, list[int]] = defaultdict(list)  # copier line -> indices in its aborted
        copier_nos: dict[int, set[int]] = defaultdict(set)  # copier line -> the txn numbers read
        for i, (_, _, v) in enumerate(d["recs"]):
            w = self.writes.get((topic, v))
            if w is not None and w.outcome is not None:
                if w.outcome == "abort":
                    aborted[w.line].append(i)
                elif what == "poll" and ((w.tc is None and w.outcome != "commit")
                                         or (w.tc is not None and d["t1"] < w.tc)):
                    early[w.line].append(i)
            if copier_aborted:
                parsed = _parse_out(v)
                if parsed is not None and parsed[0] in copier_aborted:
                    cline, cidx = copier_aborted[parsed[0]]
                    copier_hits[cline].append(i)
                    copier_txns[cline].append(cidx)
                    copier_nos[cline].add(parsed[0])
        label = f"read_committed {what}" + (f" by {d['proc']}/{d['inc']}" if what == "poll" else "")
        for tline, idxs in aborted.items():
            t = self.by_line[tline].data
            self.report("aborted-read", f"{label} returned {len(idxs)} value(s) of aborted txn "
                        f"{t['proc']}/{t['inc']}/{t['seq']}: {_values(d, idxs)}",
                        [(op.line, i) for i in idxs] + [(tline, -1)])
        for tline, idxs in early.items():
            t = self.by_line[tline].data
            when = "was never invoked" if t.get("tc") is None else f"was invoked at {t['tc']}"
            self.report("precommitted-read", f"{label} returned at {d['t1']} {len(idxs)} value(s) of txn "
                        f"{t['proc']}/{t['inc']}/{t['seq']} (outcome {t['outcome']}) whose commit {when}: "
                        f"{_values(d, idxs)}", [(op.line, i) for i in idxs] + [(tline, -1)])
        for cline, idxs in copier_hits.items():
            c = self.by_line[cline].data
            self.report("aborted-read", f"{label} of copier output {topic} returned {len(idxs)} value(s) of "
                        f"copier {c.get('pipeline', '?')}'s aborted txn(s) {sorted(copier_nos[cline])}: "
                        f"{_values(d, idxs)}",
                        [(op.line, i) for i in idxs] + [(cline, -1)], {cline: {"aborted": copier_txns[cline]}})

    def verifier(self, op: Op, saw: dict[str, dict[tuple[int, int], Witness]]) -> None:
        """A read_committed verifier incarnation must see each input at one position only; copies
        from known-aborted transactions are aborted-reads, not duplicates."""
        d = op.data
        topic = d["topic"]
        aborted = self.copier_aborted.get(topic, {})
        for i, (p, o, v) in enumerate(d["recs"]):
            parsed = _parse_out(v)
            if parsed is None or parsed[0] in aborted:
                continue
            spots = saw.setdefault(parsed[1], {})
            if (p, o) in spots:
                continue
            spots[(p, o)] = (op.line, i)
            if len(spots) == 2:
                where = ", ".join(f"{pp}@{oo}" for pp, oo in spots)
                copier = self.copier_of.get(topic, {}).get(parsed[1])
                self.report("copier-duplicate",
                            f"read_committed {d['proc']}/{d['inc']} saw input {parsed[1]!r} of {topic} twice: {where}",
                            [*spots.values(), *([copier] if copier else [])])

    def scan_finals(self) -> None:
        for op in self.kinds.get("final-read", []):
            topic = op.data["topic"]
            for i, (p, o, v) in enumerate(op.data["recs"]):
                self.place(topic, p, o, v, op.line, i)
                self.seen[topic].add(v)
            if op.data["iso"] == RC:
                self.rc_read(op, "final-read")

    def check_positions(self) -> None:
        for (topic, p, o), values in self.clash.items():
            self.report("inconsistent-offsets", f"{topic}/{p}@{o} holds {len(values)} different values: "
                        + ", ".join(map(repr, values)), values.values())
        rc_copies = self.rc_positions(set(self.twice))
        for (topic, v), spots in self.twice.items():
            where = ", ".join(f"{p}@{o}" for p, o in spots)
            found = [self.batch_at(topic, p, o) for p, o in spots]
            rows = [b for b in found if b is not None]
            writers = "; stored as " + ", ".join(
                f"producer {b[2]} epoch {b[3]} seq {b[4]} (offsets {b[0]}-{b[1]})" for b in rows) if rows else ""
            rc = rc_copies.get((topic, v), {})
            bumps, why = self.client_resend(topic, v, len(spots), rows, len(rc))
            witnesses = [*spots.values(), *(rc.values() if len(rc) > 1 else ()), *((line, -1) for line, _ in bumps[:3])]
            if bumps:
                writers += f"; {len(bumps)} epoch bump line(s) of the producer between them, first: {bumps[0][1]}"
            self.report("epoch-resend" if why is None else "duplicate",
                        f"value {v!r} of {topic} is at {len(spots)} positions: {where}{writers}"
                        + (f"; not a client re-send: {why}" if why else ""), witnesses)

    def rc_positions(self, values: set[tuple[str, str]]) -> dict[tuple[str, str], dict[tuple[int, int], Witness]]:
        """Where read_committed reads (polls and final-reads) saw each of `values`, a witness each."""
        out: dict[tuple[str, str], dict[tuple[int, int], Witness]] = defaultdict(dict)
        for op in [*self.kinds.get("poll", []), *self.kinds.get("final-read", [])]:
            if op.data["iso"] != RC:
                continue
            topic = op.data["topic"]
            for i, (p, o, v) in enumerate(op.data["recs"]):
                if (topic, v) in values:
                    out[(topic, v)].setdefault((p, o), (op.line, i))
        return out

    def client_resend(self, topic: str, v: str, copies: int, rows: list[list[int]],
                      rc_copies: int) -> tuple[list[tuple[int, str]], str | None]:
        """Whether the copies of `v` are librdkafka re-sending a plain idempotent send after its own
        message timeout (KIP-360): (the bumps that show it, None), or (bumps cited, why not).

        Each condition is one the client's re-send must meet, so nothing else can pass for it: the
        value was a plain send (a transaction's copy under a new epoch belongs to another
        transaction); one producer id stored every copy, each under its own epoch (under one epoch
        the broker's deduplication failed); at most one copy is visible at read_committed (a reader
        handed the value twice has a duplicate, whoever sent it); and every bump of that producer
        from the first copy's epoch to the last one's is recorded with a message timeout as its
        reason (a bump for a broker error is the broker losing producer state)."""
        w = self.writes.get((topic, v))
        if w is None:
            return [], "no send in the history wrote it"
        if w.outcome is not None:
            return [], "written by a transaction, not a plain idempotent send"
        if len(rows) < copies:
            return [], "the stored batch of a copy is unknown"
        if len({b[2] for b in rows}) != 1:
            return [], "stored by different producer ids"
        epochs = sorted(b[3] for b in rows)
        if len(set(epochs)) != len(epochs):
            return [], "two copies under one producer epoch (the broker's deduplication failed)"
        if rc_copies > 1:
            return [], f"{rc_copies} copies visible at read_committed"
        pid = rows[0][2]
        cited: list[tuple[int, str]] = []
        for e in range(epochs[0], epochs[-1]):
            bumps = self.bumps.get((pid, e), [])
            cited += bumps
            if not bumps:
                return cited, f"the bump of producer {pid} from epoch {e} has no recorded reason"
            other = [what for _, what in bumps if TIMED_OUT not in what]
            if other:
                return cited, f"the bump of producer {pid} from epoch {e} is not a timeout: {other[0]}"
        return cited, None

    # ---------------------------------------------------------------------------------- producers

    def check_sends(self) -> None:
        """A producer's acknowledged offsets per partition follow its produce() order: an idempotent
        (and a transactional) producer must not reorder."""
        chains: dict[tuple[str, str, int, int], list[_Write]] = defaultdict(list)
        for w in self.writes.values():
            if w.offset is not None and (w.acked or w.outcome is not None):
                chains[(w.topic, w.proc, w.inc, w.partition)].append(w)
        for (topic, proc, inc, p), ws in chains.items():
            ws.sort(key=lambda w: (w.seq, w.index))
            for a, b in zip(ws, ws[1:], strict=False):
                assert a.offset is not None and b.offset is not None
                if b.offset <= a.offset:
                    inner = a.line == b.line
                    self.report("int-nonmonotonic-send" if inner else "nonmonotonic-send",
                                f"producer {proc}/{inc} on {topic}/{p}: {_label(a)} acknowledged at {a.offset}, "
                                f"then {_label(b)} at {b.offset}", [(a.line, a.index), (b.line, b.index)])

    def check_durability(self) -> None:
        """lost-write and unseen: each acknowledged value against the read_committed final-read."""
        for w in self.writes.values():
            if not w.acked:
                continue
            final = self.finals.get((w.topic, RC))
            if final is None or w.value in final.values:
                continue  # a missing final-read is reported once, by check_presence
            at = f"{w.topic}/{w.partition}@{w.offset}" if w.offset is not None else f"{w.topic}/{w.partition}"
            reached = final.reached.get(w.partition, -1)
            neighbours = self.near(final, w.partition, w.offset)
            if final.op.data["complete"] or (w.offset is not None and reached >= w.offset):
                how = "complete" if final.op.data["complete"] else f"incomplete, but read {w.partition}@{reached}"
                self.report("lost-write", f"{_label(w)} value {w.value!r} acknowledged at {at} is missing from the "
                            f"read_committed final-read ({how})",
                            [(w.line, w.index), (final.op.line, -1)], {final.op.line: {"recs": neighbours}})
            elif w.value not in self.seen[w.topic]:
                self.report("unseen", f"{_label(w)} value {w.value!r} acknowledged at {at} was never read, and the "
                            f"incomplete read_committed final-read stopped at {w.partition}@{reached}",
                            [(w.line, w.index), (final.op.line, -1)], {final.op.line: {"recs": neighbours}})

    @staticmethod
    def near(final: _Final, p: int, offset: int | None) -> list[int]:
        """The final-read records either side of where `offset` would be."""
        offs = final.offsets.get(p, [])
        if not offs or offset is None:
            return []
        k = bisect_left(offs, offset)
        return [final.indices[p][j] for j in (k - 1, k) if 0 <= j < len(offs)]

    # ------------------------------------------------------------------------------------- copier

    def check_copiers(self) -> None:
        for topic in sorted(self.copier_topics):
            copiers = [op for op in self.kinds.get("copier", []) if op.data["output_topic"] == topic]
            final = self.finals.get((topic, RC))
            if not copiers or final is None:
                continue  # check_presence says what is missing
            aborted = self.copier_aborted.get(topic, {})
            copies: dict[str, list[int]] = defaultdict(list)  # input -> rec indices of distinct positions
            spots: set[tuple[int, int]] = set()
            for i, (p, o, v) in enumerate(final.op.data["recs"]):
                parsed = _parse_out(v)
                if parsed is None or parsed[0] in aborted or (p, o) in spots:
                    continue
                spots.add((p, o))
                copies[parsed[1]].append(i)
            for c in copiers:
                self.check_copier(c, topic, final, copies)

    def check_copier(self, c: Op, topic: str, final: _Final, copies: dict[str, list[int]]) -> None:
        """Exactly once against the group's committed offsets: what a restarted copier would start
        from. Input past them is not yet copied (an unfinished copier: reported, not judged)."""
        name = c.data.get("pipeline", "?")
        recs = final.op.data["recs"]
        upto = {int(p): o for p, o in c.data["group_offsets"].items()}
        missing: list[int] = []
        pending: dict[int, list[int]] = defaultdict(list)  # partition -> input indices past the offset
        for j, (p, o, v) in enumerate(c.data["input"]):
            got = copies.get(v, [])
            where = ", ".join(f"{recs[i][2].partition('|')[0]}@{recs[i][0]}/{recs[i][1]}" for i in got)
            if o >= upto[p]:
                pending[p].append(j)
                if got:
                    self.report("copier-duplicate", f"copier {name}: input {v!r} at {p}/{o} is in the "
                                f"read_committed final-read of {topic} ({where}) but its group committed only "
                                f"up to {p}/{upto[p]}: a restarted copier would copy it again",
                                [(c.line, j), *((final.op.line, i) for i in got)])
            elif not got:
                missing.append(j)
            elif len(got) > 1:
                self.report("copier-duplicate", f"copier {name}: input {v!r} is {len(got)} times in the "
                            f"read_committed final-read of {topic}: {where}",
                            [(c.line, j), *((final.op.line, i) for i in got)])
        for p, js in sorted(pending.items()):
            self.report("incomplete-history", f"copier {name} did not finish: its group committed up to "
                        f"{p}/{upto[p]}, {len(js)} input value(s) of partition {p} from there on are not "
                        f"judged", [(c.line, j) for j in js[:5]])
        if not missing:
            return
        if not final.op.data["complete"]:
            self.report("incomplete-history", f"copier {name}: {len(missing)} input value(s) not in the "
                        f"read_committed final-read of {topic}, which is incomplete: copier-lost not judged",
                        [(c.line, j) for j in missing[:5]] + [(final.op.line, -1)])
            return
        for j in missing:
            self.report("copier-lost", f"copier {name}: input {c.data['input'][j][2]!r} is missing from the "
                        f"read_committed final-read of {topic}, though its group committed past it",
                        [(c.line, j), (final.op.line, -1)])

    # ------------------------------------------------------------------------------------- zombies

    def check_fences(self) -> None:
        """A fenced epoch stays fenced: once InitProducerId handed its transactional id a newer
        epoch, the broker stores nothing the old epoch sends and commits nothing for it. The
        partition leader refuses the write (the coordinator's KIP-890 verification, then its own
        producer state); an answer lost on the way does not excuse a value a reader then returns."""
        readers: dict[tuple[str, str], Witness] = {}
        for op in [*self.kinds.get("poll", []), *self.kinds.get("final-read", [])]:
            for i, (_, _, v) in enumerate(op.data["recs"]):
                readers.setdefault((op.data["topic"], v), (op.line, i))
        for op in self.kinds.get("fence", []):
            d = op.data
            who = f"producer {d['pid']} epoch {d['epoch']} of {d.get('tid', '?')!r}, fenced by epoch {d['by']}"
            for i, w in enumerate(d["writes"]):
                read = readers.get((d["topic"], w["value"]))
                if w["error"] == "NONE":
                    self.report("fenced-write", f"{who}: its write {w['value']!r} to {d['topic']}/{w['partition']} "
                                f"was acknowledged at offset {w.get('offset')}", [(op.line, i)])
                elif read is not None:
                    self.report("fenced-write", f"{who}: its write {w['value']!r} to {d['topic']}/{w['partition']} "
                                f"(answered {w['error']}) was read back", [(op.line, i), read])
            if d.get("commit") == "NONE":
                self.report("fenced-write", f"{who}: its EndTxn(commit) was answered as done", [(op.line, -1)])

    # ------------------------------------------------------------------------------ hanging, gaps

    def check_stalls(self) -> None:
        for op in self.kinds.get("stall", []):
            d = op.data
            self.report("stall", f"copier {d['pipeline']}: no progress for {d['t'] - d['since']:.0f}s "
                        f"({d.get('summary', '')})", [(op.line, -1)])

    def check_hanging(self) -> None:
        for op in self.kinds.get("offsets", []):
            d = op.data
            if d["hw"] < 0 or d["lso"] < 0:
                self.report("incomplete-history", f"{d['topic']}/{d['partition']}: high watermark {d['hw']}, last "
                            f"stable offset {d['lso']} (negative: not obtained)", [(op.line, -1)])
            elif d["lso"] < d["hw"]:
                self.report("hanging-txn", f"{d['topic']}/{d['partition']}: last stable offset {d['lso']} < high "
                            f"watermark {d['hw']} after {d.get('waited_ms', '?')} ms", [(op.line, -1)])
        for op in self.kinds.get("hanging", []):
            for i, entry in enumerate(op.data["txns"]):
                text = json.dumps(entry, separators=(",", ":"))
                if isinstance(entry, dict) and set(entry) == {"error"}:  # the tool failed: nothing was judged
                    self.report("incomplete-history", f"find-hanging did not answer: {text[:200]}", [(op.line, i)])
                    continue
                self.report("hanging-txn", f"find-hanging reported an open transaction: "
                            f"{text if len(text) <= 200 else text[:197] + '...'}", [(op.line, i)])

    def check_presence(self) -> None:
        """A check without its reference data must fail loudly, not pass: say what is missing."""
        if not any(self.kinds.get(k) for k in ("send", "txn", "poll", "final-read", "copier")):
            self.report("incomplete-history", "the history holds no operations (no sends, txns, polls, "
                        "final-reads or copiers)", [(self.meta_line, -1)] if self.meta_line else [])
            return
        cite = [(self.meta_line, -1)] if self.meta_line else []
        rc_polled = {op.data["topic"] for op in self.kinds.get("poll", []) if op.data["iso"] == RC}
        for topic in sorted(self.mixed_topics | self.copier_topics | rc_polled):
            if (topic, RC) not in self.finals:
                lacking = []
                if topic in self.mixed_topics:
                    lacking.append("lost-write, unseen")
                if topic in self.copier_topics:
                    lacking.append("copier-lost, copier-duplicate")
                if topic in rc_polled:
                    lacking.append("read_committed poll-skip")
                self.report("incomplete-history", f"no read_committed final-read of {topic}: "
                            f"{'; '.join(lacking)} not judged", cite)
        copier_lines = {op.data["output_topic"] for op in self.kinds.get("copier", [])}
        for topic in sorted(self.copier_topics - copier_lines):
            self.report("incomplete-history", f"the meta line announces copier output {topic} but no copier line "
                        f"describes it: copier-lost, copier-duplicate and copier aborted-read not judged", cite)


def _parse_out(value: str) -> tuple[int, str] | None:
    """A copier output value ``t<txn>|<input>`` as (txn, input); None for anything else."""
    head, sep, body = value.partition("|")
    if not sep or head[:1] != "t" or not head[1:].isdigit():
        return None
    return int(head[1:]), body


def _label(w: _Write) -> str:
    if w.outcome is None:
        return f"send {w.proc}/{w.inc}/{w.seq}"
    return f"txn {w.proc}/{w.inc}/{w.seq}#{w.index} ({w.outcome})"


def _values(d: Mapping[str, Any], idxs: Sequence[int], most: int = 4) -> str:
    shown = ", ".join(f"{d['recs'][i][2]!r}@{d['recs'][i][0]}/{d['recs'][i][1]}" for i in idxs[:most])
    return shown + (", ..." if len(idxs) > most else "")


# -------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Exit 0: no anomalies; 1: anomalies; 2: the history could not be read or judged."""
    ap = argparse.ArgumentParser(prog="python -m tests.chaos.check",
                                 description="Check a chaos workload history (JSON lines) for anomalies.")
    ap.add_argument("history", metavar="HISTORY", help="the workload's history.jsonl")
    ap.add_argument("--json", metavar="OUT", default=None, help="also write the report as JSON to OUT")
    args = ap.parse_args(argv)
    try:
        report = check(load(args.history))
    except (OSError, HistoryError) as exc:
        print(f"unreadable history: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    return 0 if report.ok else 1
