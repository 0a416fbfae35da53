"""Broker metrics: the counters the hot paths bump (metrics_render.py turns them into text).

Counters are plain ints in dicts, so a request costs a dict increment and a clock read and
nothing that allocates. Everything that is state — offsets, groups, transactions, connections —
is read only when something scrapes, so an idle broker does no metrics work at all.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class BrokerMetrics:
    """What happened since the broker started (Prometheus counters; they reset on restart)."""

    __slots__ = ("requests", "request_seconds", "bytes_received", "bytes_sent", "connections_accepted",
                 "connections_aborted", "batches_produced", "records_produced", "duplicate_batches",
                 "produce_errors", "transactions_ended", "transactions_timed_out", "markers_written",
                 "loop_stalls", "loop_stall_seconds", "loop_stalls_100ms", "loop_stall_100ms_seconds")

    def __init__(self) -> None:
        self.requests: Counter[int] = Counter()  # api key -> requests answered (or dropped)
        self.request_seconds: defaultdict[int, float] = defaultdict(float)  # api key -> decoded to handled
        self.bytes_received = 0
        self.bytes_sent = 0
        self.connections_accepted = 0
        self.connections_aborted: Counter[str] = Counter()  # reason -> connections the broker closed
        self.batches_produced = 0
        self.records_produced = 0
        self.duplicate_batches = 0  # idempotent retries answered from the producer state, not written
        self.produce_errors: Counter[str] = Counter()  # Kafka error name -> partitions refused
        self.transactions_ended: Counter[str] = Counter()  # "commit" / "abort" -> completed
        self.transactions_timed_out = 0
        self.markers_written: Counter[str] = Counter()  # "commit" / "abort" -> control batches appended
        self.loop_stalls = 0  # the event loop did not turn for a second or more (loop_watch.py)
        self.loop_stall_seconds = 0.0
        self.loop_stalls_100ms = 0  # ... for 100 ms or more (those above included)
        self.loop_stall_100ms_seconds = 0.0
