"""The Prometheus exposition: counters from BrokerMetrics and state read at scrape time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.supported import API_NAMES

from .group.model import GroupState
from .txn.state import TxnState

if TYPE_CHECKING:
    from .context import BrokerContext

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Exposition:
    """Prometheus text format 0.0.4: one HELP and TYPE per family, then its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[Labels, float]] | float, suffix: str = "") -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        if isinstance(samples, int | float):
            samples = [((), samples)]
        for labels, value in samples:
            self._sample(name + suffix, labels, value)

    def _sample(self, name: str, labels: Labels, value: float) -> None:
        # repr: the shortest text that reads back as the same float (Prometheus parses it as Go does)
        if labels:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            self.lines.append(f"{name}{{{inner}}} {value!r}")
        else:
            self.lines.append(f"{name} {value!r}")

    def summary(self, name: str, help_text: str, rows: Iterable[tuple[Labels, float, int]]) -> None:
        """A summary without quantiles: _sum and _count per label set."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} summary")
        for labels, total, count in rows:
            self._sample(name + "_sum", labels, total)
            self._sample(name + "_count", labels, count)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(ctx: BrokerContext, connections: int, started_ms: int) -> str:
    m = ctx.metrics
    out = Exposition()
    out.family("ketch_start_time_seconds", "gauge", "When the broker started (Unix time).",
               started_ms / 1000)
    out.family("ketch_connections", "gauge", "Client connections open now.", connections)
    out.family("ketch_connections_accepted_total", "counter", "Client connections accepted.",
               m.connections_accepted)
    out.family("ketch_connections_aborted_total", "counter",
               "Connections the broker closed because it could not answer them (malformed or oversized "
               "frames, unknown API keys or versions, internal errors), by reason.",
               [((("reason", r),), n) for r, n in sorted(m.connections_aborted.items())])
    out.family("ketch_event_loop_stalls_total", "counter",
               "Times the event loop did not turn for a second or more (each is logged with the stack "
               "that held it).", m.loop_stalls)
    out.family("ketch_event_loop_stall_seconds_total", "counter", "Time those stalls lasted.",
               m.loop_stall_seconds)
    out.family("ketch_event_loop_stalls_100ms_total", "counter",
               "Times the event loop did not turn for 100 ms or more (the stalls of a second or more "
               "included).", m.loop_stalls_100ms)
    out.family("ketch_event_loop_stall_100ms_seconds_total", "counter", "Time those stalls lasted.",
               m.loop_stall_100ms_seconds)
    out.family("ketch_network_received_bytes_total", "counter", "Bytes read from clients.", m.bytes_received)
    out.family("ketch_network_sent_bytes_total", "counter", "Bytes written to clients.", m.bytes_sent)
    apis = sorted(m.requests)
    out.family("ketch_requests_total", "counter", "Requests handled, by API.",
               [((("api", API_NAMES.get(k, str(k))),), m.requests[k]) for k in apis])
    out.summary("ketch_request_duration_seconds", "Time from a request decoded to its response ready, by API "
                "(long-polling fetches count their wait).",
                [((("api", API_NAMES.get(k, str(k))),), m.request_seconds[k], m.requests[k]) for k in apis])
    out.family("ketch_produced_batches_total", "counter", "Record batches appended by Produce.", m.batches_produced)
    out.family("ketch_produced_records_total", "counter", "Records appended by Produce.", m.records_produced)
    out.family("ketch_produce_duplicate_batches_total", "counter",
               "Idempotent retries recognised by sequence number and not written again.", m.duplicate_batches)
    out.family("ketch_produce_errors_total", "counter", "Partitions of Produce requests refused, by Kafka error.",
               [((("error", e),), n) for e, n in sorted(m.produce_errors.items())])
    _partitions(ctx, out)
    _groups(ctx, out)
    _transactions(ctx, out)
    _quorum(ctx, out)
    _replication(ctx, out)
    _fetch_sessions(ctx, out)
    return out.text()


def _fetch_sessions(ctx: BrokerContext, out: Exposition) -> None:
    """The fetch sessions (KIP-227) this broker keeps as a leader."""
    cache = ctx.fetch_sessions
    out.family("ketch_fetch_sessions", "gauge", "Fetch sessions kept, by whose (follower brokers', consumers').",
               [((("kind", kind),), cache.count(privileged=kind == "follower")) for kind in ("follower", "consumer")])
    out.family("ketch_fetch_session_evictions_total", "counter",
               "Fetch sessions dropped from the full cache for a new one.", cache.evictions)


def _replication(ctx: BrokerContext, out: Exposition) -> None:
    """What this broker copied from leaders as a follower, and how long its throttle held it back."""
    if ctx.replication is None:
        return
    f = ctx.replication.fetcher
    out.family("ketch_replication_fetched_bytes_total", "counter",
               "Record bytes this broker fetched from leaders as a follower.", f.fetched_bytes)
    out.family("ketch_replication_throttled_seconds_total", "counter",
               "Time throttled replicas waited for follower_replication_throttled_rate.", f.throttled_s)
    out.family("ketch_replication_fetches_total", "counter",
               "Fetches sent to leaders, full (opening a fetch session) or incremental.",
               [((("kind", kind),), f.fetches[kind]) for kind in ("full", "incremental")])


def _quorum(ctx: BrokerContext, out: Exposition) -> None:
    """The metadata quorum as this node sees it, and the brokers the metadata log registered."""
    if ctx.quorum is None or ctx.quorum.node is None:
        return
    leader, epoch, hw, _voters = ctx.quorum.status()
    out.family("ketch_quorum_leader", "gauge", "Node id of the metadata quorum's leader (-1: none known).", leader)
    out.family("ketch_quorum_epoch", "gauge", "The metadata quorum's current epoch.", epoch)
    out.family("ketch_quorum_high_watermark", "gauge", "Committed end of the metadata log, as this node knows it.",
               hw)
    out.family("ketch_quorum_is_leader", "gauge", "1 on the node that leads the metadata quorum.",
               1 if leader == ctx.node_id else 0)
    out.family("ketch_brokers", "gauge", "Brokers registered in the metadata log, by state.",
               [((("state", state),), sum(1 for b in ctx.topics.image.brokers if b.fenced == fenced))
                for state, fenced in (("alive", False), ("fenced", True))])


def _partitions(ctx: BrokerContext, out: Exposition) -> None:
    rows: dict[str, list[tuple[Labels, float]]] = {
        "log_start_offset": [], "log_end_offset": [], "high_watermark": [], "last_stable_offset": [],
        "size_bytes": [], "segments": []}
    topics = list(ctx.topics.by_name.values())
    for t in topics:
        for p in t.partitions:
            labels = (("topic", t.name), ("partition", str(p.index)))
            plog = p
            rows["log_start_offset"].append((labels, plog.log_start_offset))
            rows["log_end_offset"].append((labels, plog.log_end_offset))
            rows["high_watermark"].append((labels, plog.high_watermark))
            rows["last_stable_offset"].append((labels, plog.last_stable_offset))
            rows["size_bytes"].append((labels, plog.size_in_bytes))
            rows["segments"].append((labels, p.segment_count))
    out.family("ketch_topics", "gauge", "Topics, internal ones included.", len(topics))
    out.family("ketch_partitions", "gauge", "Partitions this broker leads.", sum(p.is_leader for t in topics for p in t.partitions))
    helps = {
        "log_start_offset": "First offset still in the log.",
        "log_end_offset": "Offset the next record will get.",
        "high_watermark": "Offset up to which records are committed (read_uncommitted consumers read to here).",
        "last_stable_offset": "Offset below which no transaction is open (read_committed consumers read to "
                              "here); high_watermark - last_stable_offset is data held back by open transactions.",
        "size_bytes": "Bytes of log segments on disk.",
        "segments": "Log segments on disk.",
    }
    for key, samples in rows.items():
        out.family(f"ketch_partition_{key}", "gauge", helps[key], samples)


def _groups(ctx: BrokerContext, out: Exposition) -> None:
    groups = list(ctx.groups.sm.groups.values())
    by_state = Counter(g.state for g in groups)
    out.family("ketch_groups", "gauge", "Consumer groups this broker coordinates, by state.",
               [((("state", s.value),), by_state[s]) for s in GroupState])
    out.family("ketch_group_members", "gauge", "Members of the groups this broker coordinates.",
               sum(len(g.members) for g in groups))


def _transactions(ctx: BrokerContext, out: Exposition) -> None:
    m = ctx.metrics
    by_state = Counter(ctx.txn.visible_state(t) for t in ctx.txn.all())
    out.family("ketch_transactional_ids", "gauge", "Transactional ids this broker coordinates, by state.",
               [((("state", s.wire_name),), by_state[s]) for s in TxnState if s is not TxnState.PREPARE_EPOCH_FENCE])
    out.family("ketch_transactions_completed_total", "counter",
               "Transactions completed by the coordinator (markers written, completion recorded), by result.",
               [((("result", r),), m.transactions_ended[r]) for r in ("commit", "abort")])
    now = ctx.clock.now_ms()
    prepared = [t for t in ctx.txn.all() if t.two_pc and t.state == TxnState.ONGOING]
    out.family("ketch_prepared_transactions", "gauge",
               "Open transactions of two-phase-commit ids (KIP-939) this broker coordinates: no timeout ends "
               "them, and each holds back the last stable offset of its partitions until someone ends it.",
               len(prepared))
    oldest = max((now - t.start_ms for t in prepared if t.start_ms >= 0), default=0)
    out.family("ketch_prepared_transaction_max_age_seconds", "gauge",
               "How long the oldest of those has been open (0: none).", max(oldest, 0) / 1000)
    out.family("ketch_transactions_timed_out_total", "counter",
               "Transactions the coordinator aborted because they passed their timeout.", m.transactions_timed_out)
    out.family("ketch_transaction_markers_written_total", "counter",
               "Commit/abort control batches this broker appended to its partitions (WriteTxnMarkers).",
               [((("result", r),), m.markers_written[r]) for r in ("commit", "abort")])
    gc = ctx.topics.group_commit
    out.family("ketch_group_commit_fsyncs_total", "counter",
               "Log flushes that made transaction-state records and markers durable before they were acted "
               "on (one per log per event-loop turn).", gc.fsyncs)
    out.family("ketch_group_commit_waits_total", "counter",
               "Appends that waited for such a flush; waits / fsyncs is how many shared one.", gc.waiters)
