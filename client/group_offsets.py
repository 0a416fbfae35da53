"""A group member's offset commits and fetches, shared by both group protocols.

The classic member (group.py) commits with its generation and member id; a KIP-848 member
(group_consumer.py) with its member epoch, on OffsetCommit/OffsetFetch v9, the versions that carry
it (the coordinator refuses older ones from such a member). What differs is said by the
subclass: who it is (`_identity`), which versions it needs, and which answers mean "you are no
longer who you think" (the commit fails: someone else may process these records again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)

from .cluster import COORDINATOR_GROUP, Cluster
from .errors import CommitFailedError, KafkaTimeoutError, RetriableError, error_from_code
from .structs import OffsetAndMetadata, TopicPartition

E = ErrorCode
COORDINATOR_GONE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})


class GroupOffsets:
    _cluster: Cluster
    group_id: str
    group_instance_id: str | None
    retry_backoff: float
    require_stable: bool
    # OffsetCommit/OffsetFetch versions this member must use (None: the client's usual range)
    OFFSET_VERSIONS: tuple[int, int] | None = None
    # commit answers meaning the member is not who it thinks: the commit fails
    REFUSED: frozenset[int] = frozenset()
    # commit/fetch answers worth another try beyond Kafka's retriable ones
    RETRY: frozenset[int] = frozenset()

    def _identity(self) -> tuple[int, str]:
        """(generation or member epoch, member id) that offsets are committed and fetched with."""
        raise NotImplementedError

    def _refused(self) -> None:
        """A commit was refused with one of REFUSED."""

    async def _coordinator(self) -> int:
        return await self._cluster.coordinator(self.group_id, COORDINATOR_GROUP)

    def _coordinator_gone(self) -> None:
        self._cluster.forget_coordinator(self.group_id, COORDINATOR_GROUP)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float) -> None:
        if not offsets:
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata))
        deadline = self._cluster.clock.monotonic() + timeout
        while True:
            epoch, member_id = self._identity()  # again on each try: a heartbeat may have moved the epoch
            req = OffsetCommitRequest(
                group_id=self.group_id, generation_id_or_member_epoch=epoch, member_id=member_id,
                group_instance_id=self.group_instance_id,
                topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            try:
                node = await self._coordinator()
                conn = await self._cluster.connection(node)
                resp = await conn.request(req, version=conn.version_for(OffsetCommitRequest,
                                                                         versions=self.OFFSET_VERSIONS))
                codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            except (RetriableError, OSError, TimeoutError) as e:
                self._coordinator_gone()
                if self._cluster.clock.monotonic() > deadline:
                    raise KafkaTimeoutError(f"offset commit did not complete: {e}") from e
                await asyncio.sleep(self.retry_backoff)
                continue
            if not codes:
                return
            if codes & self.REFUSED:
                self._refused()
                raise CommitFailedError(
                    "commit refused: the group has rebalanced since these records were fetched; they may be "
                    f"processed again by the partitions' new owner ({', '.join(E(c).name for c in codes)})")
            if codes & COORDINATOR_GONE:
                self._coordinator_gone()
            elif not all(E(c).retriable or c in self.RETRY for c in codes):
                raise error_from_code(next(iter(codes)), f"OffsetCommit {self.group_id}")
            if self._cluster.clock.monotonic() > deadline:
                raise KafkaTimeoutError(f"offset commit failed: {[E(c).name for c in codes]}")
            await asyncio.sleep(self.retry_backoff)

    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout: float
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        tps = list(tps)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        deadline = self._cluster.clock.monotonic() + timeout
        while True:
            try:
                node = await self._coordinator()
                conn = await self._cluster.connection(node)
                v = conn.version_for(OffsetFetchRequest, versions=self.OFFSET_VERSIONS)
                if v >= 8:  # one group of the batched form, with who asks (v9: checked against the group)
                    epoch, member_id = self._identity()
                    req = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
                        group_id=self.group_id, member_id=member_id or None, member_epoch=epoch,
                        topics=[OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()])],
                        require_stable=self.require_stable)
                else:
                    req = OffsetFetchRequest(
                        group_id=self.group_id,
                        topics=[OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                        require_stable=self.require_stable)
                resp = await conn.request(req, version=v)
                if v >= 8:
                    [group] = resp.groups
                    error, topics = group.error_code, group.topics
                else:
                    error, topics = resp.error_code, resp.topics
                codes = {error} | {p.error_code for t in topics for p in t.partitions}
                codes.discard(0)
                if not codes:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
                    for t in topics:
                        for p in t.partitions:
                            tp = TopicPartition(t.name, p.partition_index)
                            out[tp] = (OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch)
                                       if p.committed_offset >= 0 else None)
                    return {tp: out.get(tp) for tp in tps}
                if codes & COORDINATOR_GONE:
                    self._coordinator_gone()
                elif not all(E(c).retriable or c in self.RETRY for c in codes):
                    raise error_from_code(next(iter(codes)), f"OffsetFetch {self.group_id}")
            except (RetriableError, OSError, TimeoutError):
                self._coordinator_gone()
            if self._cluster.clock.monotonic() > deadline:
                raise KafkaTimeoutError(f"could not fetch committed offsets of {self.group_id}")
            await asyncio.sleep(self.retry_backoff)
