"""The marker sender's bookkeeping, without I/O: which markers are owed, to whom, and when a
transaction has all of them.

A `MarkerJob` (one PrepareCommit/PrepareAbort) owes one marker per partition. `drain()` groups
every owed marker that is not in flight or backing off by the broker leading its partition — one
WriteTxnMarkers request per broker carries the markers of many transactions, which is what makes
small transactions cheap. `on_response()`/`on_failure()` record the outcome; a job whose every
partition has its marker comes out of `take_done()`, and only then may the coordinator write
CompleteCommit/CompleteAbort.

What a partition leader's error means for its marker (after Kafka's completion handler):
* NONE: written.
* INVALID_PRODUCER_EPOCH: the partition has already seen a newer epoch of this producer, so the
  epoch this job writes under is not the transaction's any more; TRANSACTION_COORDINATOR_FENCED: a
  newer coordinator owns the transactional id. Either way, as Kafka's completion handler does,
  this coordinator stops sending for the job and does not complete it: writing CompleteX over a
  partition that refused the marker would declare an outcome that partition never recorded. The
  job is reported by `take_abandoned()` so the shell can say so; the transaction stays in
  PrepareX until a coordinator (re)load resends its markers.
* UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION: the partition could never have taken the
  transaction's data; counted as written (Kafka removes the partition from the wait).
* a topic that no longer exists (the leader lookup says so): nothing to mark; counted as written.
* anything else (not leader, unknown partition while metadata catches up, timeouts, storage
  errors): retried after a backoff until it succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.topic_partition import TopicPartition

from .machine import MarkerJob

JobKey = tuple[str, int, int, bool]  # transactional id, producer id, epoch, commit
DELETED = -2  # what a leader lookup answers for a partition whose topic no longer exists
NO_LEADER = -1

_WRITTEN = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})
_ABANDON = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def job_key(job: MarkerJob) -> JobKey:
    return job.transactional_id, job.producer_id, job.producer_epoch, job.commit


@dataclass(slots=True)
class _Owed:
    job: MarkerJob
    remaining: set[TopicPartition]
    in_flight: set[TopicPartition] = field(default_factory=set)
    retry_at: dict[TopicPartition, int] = field(default_factory=dict)
    abandoned: bool = False
    abandon_reason: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class MarkerSend:
    """Markers of one job for one broker, as one entry of a WriteTxnMarkers request."""

    key: JobKey
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


class MarkerQueue:
    def __init__(self, retry_backoff_ms: int = 100) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self._owed: dict[JobKey, _Owed] = {}
        self._done: list[MarkerJob] = []
        self._abandoned: list[tuple[MarkerJob, ErrorCode]] = []

    def __len__(self) -> int:
        return len(self._owed)

    def add(self, job: MarkerJob) -> None:
        key = job_key(job)
        owed = self._owed.get(key)
        if owed is not None:
            owed.remaining |= job.partitions
            return
        self._owed[key] = _Owed(job, set(job.partitions))
        if not job.partitions:
            self._finish(key)

    def pending_partitions(self, key: JobKey) -> frozenset[TopicPartition]:
        owed = self._owed.get(key)
        return frozenset(owed.remaining) if owed else frozenset()

    def drain(self, now_ms: int, leader_of: Callable[[TopicPartition], int],
              busy: Iterable[int] = ()) -> dict[int, list[MarkerSend]]:
        """Owed markers ready to go, by destination broker; they are in flight until answered.
        Brokers in `busy` still have a request outstanding and get nothing new yet."""
        skip = set(busy)
        out: dict[int, dict[JobKey, list[TopicPartition]]] = {}
        finished: list[JobKey] = []
        for key, owed in self._owed.items():
            for tp in sorted(owed.remaining - owed.in_flight):
                if owed.retry_at.get(tp, 0) > now_ms:
                    continue
                node = leader_of(tp)
                if node == DELETED:
                    owed.remaining.discard(tp)
                    continue
                if node < 0 or node in skip:
                    continue
                out.setdefault(node, {}).setdefault(key, []).append(tp)
                owed.in_flight.add(tp)
            if not owed.remaining:
                finished.append(key)
        for key in finished:
            self._finish(key)
        sends: dict[int, list[MarkerSend]] = {}
        for node, by_job in out.items():
            for key, tps in by_job.items():
                j = self._owed[key].job
                sends.setdefault(node, []).append(MarkerSend(key, j.producer_id, j.producer_epoch, j.commit,
                                                             j.coordinator_epoch, tuple(tps)))
        return sends

    def drop(self, which: Callable[[MarkerJob], bool]) -> int:
        """Forget the jobs `which` selects: their coordinator lost the transactional ids' partition,
        and the new one resends what is still owed under its own epoch. Answers still in flight
        for them are ignored. Returns how many were dropped."""
        gone = [key for key, owed in self._owed.items() if which(owed.job)]
        for key in gone:
            del self._owed[key]
        return len(gone)

    def next_retry_ms(self) -> int | None:
        """When a backing-off marker becomes ready again (for the sender's timer)."""
        times = [t for o in self._owed.values() for tp, t in o.retry_at.items() if tp in o.remaining
                 and tp not in o.in_flight]
        return min(times) if times else None

    def has_ready(self, now_ms: int) -> bool:
        return any(tp not in o.in_flight and o.retry_at.get(tp, 0) <= now_ms
                   for o in self._owed.values() for tp in o.remaining)

    def on_response(self, sends: list[MarkerSend], errors: dict[tuple[int, str, int], int], now_ms: int) -> None:
        """`errors` maps (producer id, topic, partition) to the leader's error code; a partition
        missing from the answer is retried."""
        for s in sends:
            owed = self._sent_by(s)
            if owed is None:
                continue
            for tp in s.partitions:
                owed.in_flight.discard(tp)
                code = errors.get((s.producer_id, tp[0], tp[1]), ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in _WRITTEN:
                    owed.remaining.discard(tp)
                    owed.retry_at.pop(tp, None)
                elif code in _ABANDON:
                    owed.abandoned = True
                    owed.abandon_reason = ErrorCode(code)
                else:
                    owed.retry_at[tp] = now_ms + self.retry_backoff_ms
            self._settle(s.key)

    def on_failure(self, sends: list[MarkerSend], now_ms: int) -> None:
        """The request failed as a whole (connection lost, timeout): retry everything in it."""
        for s in sends:
            owed = self._sent_by(s)
            if owed is None:
                continue
            for tp in s.partitions:
                owed.in_flight.discard(tp)
                owed.retry_at[tp] = now_ms + self.retry_backoff_ms

    def _sent_by(self, s: MarkerSend) -> _Owed | None:
        """The job that sent `s`, if it is still owed: not one dropped since (its partition moved
        away), even when the reload that followed owes the same markers under a new coordinator
        epoch -- an answer to the old epoch's request (TRANSACTION_COORDINATOR_FENCED, as the
        partition has seen a newer one meanwhile) says nothing of the new job's (simulation seed 20,
        `--faults flip`: it abandoned the reloaded job, and the transaction stayed prepared)."""
        owed = self._owed.get(s.key)
        return owed if owed is not None and owed.job.coordinator_epoch == s.coordinator_epoch else None

    def _settle(self, key: JobKey) -> None:
        owed = self._owed[key]
        if owed.in_flight:
            return
        if owed.abandoned:
            del self._owed[key]
            self._abandoned.append((owed.job, owed.abandon_reason))
        elif not owed.remaining:
            self._finish(key)

    def _finish(self, key: JobKey) -> None:
        owed = self._owed.pop(key)
        self._done.append(owed.job)

    def take_done(self) -> list[MarkerJob]:
        done, self._done = self._done, []
        return done

    def take_abandoned(self) -> list[tuple[MarkerJob, ErrorCode]]:
        """Jobs given up on since the last call, with the error that ended them."""
        out, self._abandoned = self._abandoned, []
        return out


def build_request(sends: list[MarkerSend]) -> WriteTxnMarkersRequest:
    markers = []
    for s in sends:
        by_topic: dict[str, list[int]] = {}
        for topic, part in s.partitions:
            by_topic.setdefault(topic, []).append(part)
        markers.append(WritableTxnMarker(
            producer_id=s.producer_id, producer_epoch=s.producer_epoch, transaction_result=s.commit,
            topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            coordinator_epoch=s.coordinator_epoch))
    return WriteTxnMarkersRequest(markers=markers)


def response_errors(resp: WriteTxnMarkersResponse) -> dict[tuple[int, str, int], int]:
    return {(m.producer_id, t.name, p.partition_index): p.error_code
            for m in resp.markers for t in m.topics for p in t.partitions}
