"""The controller's decisions, sans-IO: what records to propose for a request, given the image
(the broker's own, which its MetadataPublisher keeps: the controller holds no copy).

It runs on the quorum leader. Decisions are taken against a working view — the committed image
plus what this controller proposed and has not seen committed yet — so two requests in flight
never get the same producer ids or broker epochs. When leadership is lost the working view is
dropped; the next leader starts from its committed image (the shell serves only once the
leader's own epoch has committed, so that image holds everything committed before).

Brokers: a registration gets a new broker epoch and a RegisterBrokerRecord (fenced); heartbeats
from a broker that has applied the log up to its registration unfence it; a broker not heard
from for the session timeout is fenced (on a new leader, every broker gets a full session first).
A fence or a controlled shutdown is one entry with the partition changes that move leadership
away (placement.py); an unfence brings back leaders for partitions that had none.

Log directories (KIP-858): a broker registers the ids of its online log directories, tells which
directory holds each of its replicas (AssignReplicasToDirs), and names failed ones in its
heartbeats. A directory newly reported failed is one entry: the broker's registration without it
and, for every replica the directory holds, the same partition changes a fence makes for that
partition alone (out of the ISR, leadership to another in-sync replica). An assignment to a
directory already failed — the broker reports the failure before the assignment — does the same.

Topics: decided against the committed image only — the shell runs one topic or partition
decision at a time and waits for its entry to commit — so a topic and its partitions are one
entry: on every broker they appear together or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from protocol.acl import AclBinding, AclFilter
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.metadata_records import (
    BROKER_RESOURCE,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    frame,
    frame_batch,
)
from protocol.topic_partition import TopicPartition
from storage.faults import broken

from ..metadata.image import NO_LEADER, BrokerInfo, MetadataImage, TopicInfo
from ..metadata.publisher import MetadataPublisher
from . import reassignment, scram
from .partition_change import LogEnds, build, framed, min_isr, needs_recovery
from .placement import (
    check_assignment,
    elect,
    eligible,
    initial_state,
    led_by,
    move_leadership,
    place,
    unclean_allowed,
)

# (topic id, partition, leader epoch, partition epoch, new ISR as (broker id, broker epoch)): one
# partition of an AlterPartition request
IsrRequest = tuple[uuid.UUID, int, int, int, Sequence[tuple[int, int]]]
PRODUCER_ID_BLOCK = 1000
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: a user operation of more records is refused
# (POLICY_VIOLATION), since one entry is decoded and applied by every broker in one go.
MAX_RECORDS_PER_USER_OP = 10_000
REGISTER_BROKER_RECORD_VERSION = 3  # v3: the log directories (KIP-858)
REGISTRATION_CHANGE_DIRS_VERSION = 2  # BrokerRegistrationChangeRecord v2: the log directories
PLAINTEXT = 0  # SecurityProtocol id


class QuorumController:
    def __init__(self, producer_id_floor: int = 0, session_timeout_ms: int = 9000,
                 min_insync_replicas: int = 1, metadata: MetadataPublisher | None = None) -> None:
        self.metadata = metadata or MetadataPublisher()  # the committed image: this broker's, not a copy
        self.session_timeout_ms = session_timeout_ms
        self.min_insync_replicas = min_insync_replicas  # the static setting: the cluster-wide default's start
        self._next_producer_id: int | None = None  # working view: includes uncommitted blocks
        # Ids below this were handed out before the quorum kept them (a data directory from a
        # Ketch that wrote producer_ids.json): never hand them out again.
        self.producer_id_floor = producer_id_floor
        self._next_broker_epoch: int | None = None
        self._heard: dict[int, int] = {}  # broker -> monotonic ms of its last heartbeat (this leadership only)
        self._lead_since_ms: int | None = None
        self._fencing: set[tuple[int, int]] = set()  # (broker, epoch) proposed for fencing, not yet applied

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    def reset(self) -> None:
        """Leadership changed: forget what was proposed and not committed, and who was heard."""
        self._next_producer_id = None
        self._next_broker_epoch = None
        self._heard.clear()
        self._lead_since_ms = None
        self._fencing.clear()

    # ---- producer ids ---------------------------------------------------------------------------
    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[bytes, int, int]:
        """(record to propose, first id, count): the block is the broker's once the record commits.
        Only for the broker's current registration (STALE_BROKER_EPOCH otherwise, as Kafka checks
        it): a request from a process that has since been replaced gets nothing."""
        b = self.image.broker(broker_id)
        if b is None or b.epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"broker {broker_id} epoch {broker_epoch} is not its current registration's")
        start = max(self.image.next_producer_id, self._next_producer_id or 0, self.producer_id_floor)
        self._next_producer_id = start + PRODUCER_ID_BLOCK
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                   next_producer_id=start + PRODUCER_ID_BLOCK)
        return frame(record), start, PRODUCER_ID_BLOCK

    # ---- brokers --------------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, incarnation_id: object, listeners: Sequence[tuple[Any, ...]],
                        rack: str | None, now_ms: int, previous_broker_epoch: int = -1,
                        log_dirs: Iterable[uuid.UUID] = ()) -> tuple[bytes, int]:
        """(entry, broker epoch) for a broker that (re)starts: a new epoch, fenced until caught up.

        A broker registering again takes, in the same entry, the partition changes fencing it would:
        out of every ISR it is not the last member of, its leaderships moved to in-sync replicas.
        Unless its last shutdown was clean — it gives back the broker epoch it stopped under
        (PreviousBrokerEpoch, KIP-966) — its log may have lost its unflushed tail, and a partition
        only it can lead is left without a leader until it is unfenced, when it leads again under a
        new leader epoch: kept at the old epoch, it took new records at offsets a returning follower
        still held under that epoch, and the follower saw no divergence. After a clean shutdown
        such a partition keeps its leader and epoch: its log is whole. `log_dirs`: the ids of its
        log directories that are online (a replica in another is offline: placement.py)."""
        epoch = max([b.epoch for b in self.image.brokers] + [self._next_broker_epoch or 0]) + 1
        self._next_broker_epoch = epoch
        self._heard[broker_id] = now_ms
        record = RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,  # type: ignore[arg-type]
            # (name, host, port[, security protocol id]): PLAINTEXT when not said
            end_points=[BrokerEndpoint(name=lst[0], host=lst[1], port=lst[2],
                                       security_protocol=lst[3] if len(lst) > 3 else PLAINTEXT) for lst in listeners],
            rack=rack, fenced=True, log_dirs=sorted(log_dirs))
        old = self.image.broker(broker_id)
        clean = old is not None and (previous_broker_epoch == old.epoch or broken("sole-isr-epoch"))
        moves = move_leadership(self.image, {broker_id}, self.min_insync_replicas,
                                unclean_shutdown=frozenset() if clean else frozenset({broker_id}))
        if clean:
            moves = [c for c in moves if c.leader != NO_LEADER]
        return frame_batch([frame(record, REGISTER_BROKER_RECORD_VERSION)] + [framed(c) for c in moves]), epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: int, offline_dirs: Iterable[uuid.UUID] = ()
                  ) -> tuple[int, bytes | None, bool, bool, bool]:
        """(error, entry to propose or None, caught up, fenced once it applies, may shut down).

        A broker that wants to shut down is marked so (its leaderships move to other ISR members
        in the same entry) and is told it may stop once it leads nothing. Log directories in
        `offline_dirs` that its registration still has online go offline in the same entry
        (see the module docstring); one that would leave it none online is ignored (a broker
        whose every log directory failed stops, as Kafka's halts)."""
        b = self.image.broker(broker_id)
        if b is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, None, False, True, False
        if b.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, None, False, True, False
        self._heard[broker_id] = now_ms
        caught_up = metadata_offset >= b.registered_at
        records: list[bytes] = []
        failed = set(offline_dirs)
        online = tuple(d for d in b.log_dirs if d not in failed)
        if online and len(online) < len(b.log_dirs):
            records.append(frame(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=b.epoch,
                                                                log_dirs=list(online)),
                                 REGISTRATION_CHANGE_DIRS_VERSION))
            b = replace(b, log_dirs=online)
        if want_shut_down:
            if b.fenced or not led_by(self.image, broker_id) and b.in_controlled_shutdown:
                return 0, self._with_moves(records, set(), b) if records else None, caught_up, b.fenced, True
            if not b.in_controlled_shutdown:
                change = BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=b.epoch,
                                                        in_controlled_shutdown=1)
                records.append(frame(change, 1))
            return 0, self._with_moves(records, {broker_id}, b), caught_up, False, False
        if b.fenced and caught_up and not want_fence:
            records.append(frame(UnfenceBrokerRecord(id=broker_id, epoch=b.epoch)))
            return 0, self._with_moves(records, set(), replace(b, fenced=False)), True, False, False
        if not b.fenced and want_fence:
            records.append(frame(FenceBrokerRecord(id=broker_id, epoch=b.epoch)))
            return 0, self._with_moves(records, {broker_id}, b), caught_up, True, False
        return 0, self._with_moves(records, set(), b) if records else None, caught_up, b.fenced, False

    def _with_moves(self, records: list[bytes], leaving: set[int], changed: BrokerInfo | None = None) -> bytes | None:
        """`records` and the leadership changes they call for, as one entry (None if neither);
        `changed`: a broker as `records` leave it (unfenced, or with fewer log directories online)."""
        image = self.image
        if changed is not None:
            image = image._with_broker(image.offset, changed)  # noqa: SLF001
        out = records + [framed(c) for c in move_leadership(image, leaving, self.min_insync_replicas)]
        return frame_batch(out) if out else None

    def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                assignments: Iterable[tuple[uuid.UUID, uuid.UUID, int]]
                                ) -> tuple[int, bytes | None, dict[tuple[uuid.UUID, int], int]]:
        """AssignReplicasToDirs: (error, entry or None, error per (topic id, partition)) for
        `assignments` of (directory, topic id, partition) — the log directory that holds each
        replica of this broker. A replica assigned to a directory the broker has reported failed
        leaves the ISR and its leadership in the same entry (the module docstring)."""
        b = self.image.broker(broker_id)
        if b is None or b.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, None, {}
        wanted = {(topic_id, i): d for d, topic_id, i in assignments}  # a partition named twice: the last
        by_id = {t.topic_id: t for t in self.image.topics.values()}
        live = set(self.image.live_brokers())
        outcome: dict[tuple[uuid.UUID, int], int] = {}
        changes = []
        for (topic_id, i), d in wanted.items():
            t = by_id.get(topic_id)
            if t is None:
                outcome[(topic_id, i)] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not 0 <= i < len(t.partitions):
                outcome[(topic_id, i)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            p = t.partitions[i]
            if broker_id not in p.replicas:
                outcome[(topic_id, i)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            outcome[(topic_id, i)] = ErrorCode.NONE
            if p.directory(broker_id) == d:
                continue
            directories = p.with_directory(broker_id, d)
            placed = replace(p, directories=directories)
            moved = replace(t, partitions=t.partitions[:i] + (placed,) + t.partitions[i + 1:])
            isr = None if self.image.replica_online(placed, broker_id) else [r for r in p.isr if r != broker_id]
            change = build(moved, i, isr, eligible(self.image, placed, live), min_isr(self.image, t, self.min_insync_replicas),
                           unclean_election=unclean_allowed(t))  # a replica back online may lead a leaderless partition
            change = replace(change or PartitionChangeRecord(partition_id=i, topic_id=topic_id),
                             directories=list(directories))
            changes.append(framed(change))
        return 0, frame_batch(changes) if changes else None, outcome

    def expire(self, now_ms: int) -> bytes | None:
        """Fence every unfenced broker not heard from for the session timeout: one entry, with
        the leadership changes that follow."""
        if self._lead_since_ms is None:
            self._lead_since_ms = now_ms  # a new leader: every broker gets a full session first
        self._fencing = {(n, e) for n, e in self._fencing if (b := self.image.broker(n)) and not b.fenced
                         and b.epoch == e}
        out = []
        leaving = set()
        for b in self.image.brokers:
            last = self._heard.get(b.node_id, self._lead_since_ms)
            if not b.fenced and now_ms - last > self.session_timeout_ms and (b.node_id, b.epoch) not in self._fencing:
                self._fencing.add((b.node_id, b.epoch))
                out.append(frame(FenceBrokerRecord(id=b.node_id, epoch=b.epoch)))
                leaving.add(b.node_id)
        return self._with_moves(out, leaving) if out else None

    # ---- recovery of partitions nobody is known to hold whole ----------------------------------------
    def logs_to_inspect(self) -> dict[int, list[tuple[uuid.UUID, int]]]:
        """Broker -> the partitions whose log's end the controller must learn from it
        (GetReplicaLogInfo) before one of them can lead: leaderless, no ISR and no ELR, and every
        replica that may hold what no whole replica holds (LastKnownElr) back (partition_change.py)."""
        live = set(self.image.live_brokers())
        out: dict[int, list[tuple[uuid.UUID, int]]] = {}
        for t in self.image.topics.values():
            for i, p in enumerate(t.partitions):
                if needs_recovery(p, eligible(self.image, p, live)):
                    for r in p.last_known_elr:
                        out.setdefault(r, []).append((t.topic_id, i))
        return dict(sorted(out.items()))

    def recover(self, answers: Mapping[int, tuple[int, Mapping[tuple[uuid.UUID, int], tuple[int, int]]]]
                ) -> bytes | None:
        """Recovery elections from what brokers answered: broker -> (the broker epoch it answered
        in, (topic id, partition) -> (last written leader epoch, log end offset)). An answer from
        another registration than the broker's current one is not counted (the process that
        answered may have lost its log since); a partition leads only once every candidate has
        answered, and then the furthest log leads."""
        current = {n: a for n, (e, a) in answers.items() if (b := self.image.broker(n)) and b.epoch == e}
        live = set(self.image.live_brokers())
        changes = []
        for t in self.image.topics.values():
            for i, p in enumerate(t.partitions):
                ok = eligible(self.image, p, live)
                if not needs_recovery(p, ok):
                    continue
                logs: LogEnds = {r: current[r][(t.topic_id, i)] for r in p.last_known_elr
                                 if (t.topic_id, i) in current.get(r, {})}
                change = build(t, i, None, ok, min_isr(self.image, t, self.min_insync_replicas), logs=logs)
                if change is not None and change.leader not in (NO_LEADER, NO_LEADER_CHANGE):
                    changes.append(framed(change))
        return frame_batch(changes) if changes else None

    # ---- topics ----------------------------------------------------------------------------------------
    @staticmethod
    def _bounded(records: int) -> None:
        """Kafka's bound on the records of one user operation (QuorumController.MAX_RECORDS_PER_USER_OP):
        the change is one entry that every broker decodes, applies and opens logs for at once."""
        if records > MAX_RECORDS_PER_USER_OP:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                     assignments: Sequence[Sequence[int]] | None = None) -> tuple[bytes, uuid.UUID]:
        """(entry, topic id). Name, count and configs are checked by the caller (TopicTable)."""
        if name in self.image.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self._bounded(1 + len(configs) + (len(assignments) if assignments else partitions))
        live = self.image.live_brokers()
        if assignments:
            for a in assignments:
                check_assignment(a, [b.node_id for b in self.image.brokers])
            replicas = [list(a) for a in assignments]
        else:
            replicas = place(name, 0, partitions, replication_factor, live)
        topic_id = uuid.uuid4()
        records = [frame(TopicRecord(name=name, topic_id=topic_id))]
        records += [frame(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v))
                    for k, v in sorted(configs.items())]
        for i, r in enumerate(replicas):
            p = initial_state(r, live)
            records.append(frame(PartitionRecord(partition_id=i, topic_id=topic_id, replicas=list(p.replicas),
                                                 isr=list(p.isr), leader=p.leader, leader_epoch=p.leader_epoch,
                                                 partition_epoch=p.partition_epoch)))
        return frame_batch(records), topic_id

    def adopt_topic(self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str],
                    node: int) -> bytes:
        """A topic of a single-node data directory from before the quorum (topics.json): its id
        kept, every partition on `node` and led by it, at the epoch its log already has (0)."""
        records = [frame(TopicRecord(name=name, topic_id=topic_id))]
        records += [frame(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v))
                    for k, v in sorted(configs.items())]
        records += [frame(PartitionRecord(partition_id=i, topic_id=topic_id, replicas=[node], isr=[node], leader=node,
                                          leader_epoch=0, partition_epoch=0)) for i in range(partitions)]
        return frame_batch(records)

    def _topic(self, name: str) -> TopicInfo:
        t = self.image.topics.get(name)
        if t is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return t

    def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> bytes:
        t = self._topic(name)
        first = len(t.partitions)
        if count <= first:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {first} partitions, which is higher than the requested {count}."
                             if count < first else f"Topic already has {first} partitions.")
        self._bounded(count - first)
        live = self.image.live_brokers()
        if assignments is not None:
            for a in assignments:
                check_assignment(a, [b.node_id for b in self.image.brokers])
            replicas = [list(a) for a in assignments]
        else:
            replicas = place(name, first, count - first, len(t.partitions[0].replicas) if t.partitions else 1, live)
        out = []
        for i, r in enumerate(replicas, start=first):
            p = initial_state(r, live)
            out.append(frame(PartitionRecord(partition_id=i, topic_id=t.topic_id, replicas=list(p.replicas),
                                             isr=list(p.isr), leader=p.leader, leader_epoch=0, partition_epoch=0)))
        return frame_batch(out)

    def delete_topic(self, name: str) -> tuple[bytes, uuid.UUID]:
        t = self._topic(name)
        return frame(RemoveTopicRecord(topic_id=t.topic_id)), t.topic_id

    def set_configs(self, name: str, configs: Mapping[str, str]) -> bytes | None:
        """The topic's whole new set of overrides; None if nothing changes."""
        t = self._topic(name)
        out = [frame(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v))
               for k, v in sorted(configs.items()) if t.configs.get(k) != v]
        out += [frame(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=None))
                for k in sorted(t.configs) if k not in configs]
        return frame_batch(out) if out else None

    # ---- dynamic broker configs -------------------------------------------------------------------
    def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> bytes | None:
        """The whole new set of dynamic configs of a BROKER resource ("" the cluster-wide default,
        else a broker id; names and values checked by the caller); None if nothing changes."""
        if resource_name != "" and not resource_name.isdigit():
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid broker resource name {resource_name!r}")
        now = self.image.broker_configs.get(resource_name, {})
        out = [frame(ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=resource_name, name=k, value=v))
               for k, v in sorted(configs.items()) if now.get(k) != v]
        out += [frame(ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=resource_name, name=k, value=None))
                for k in sorted(now) if k not in configs]
        return frame_batch(out) if out else None

    # ---- ACLs -------------------------------------------------------------------------------------
    def create_acls(self, bindings: Sequence[AclBinding]) -> tuple[bytes | None, list[tuple[int, str | None]]]:
        """CreateAcls: (entry, (error, message) per binding). A binding Kafka would refuse gets
        INVALID_REQUEST; one that exists already (or twice in the request) is created once."""
        have = set(self.image.acls.values())
        records: list[bytes] = []
        results: list[tuple[int, str | None]] = []
        for b in bindings:
            problem = b.problem()
            if problem is not None:
                results.append((int(ErrorCode.INVALID_REQUEST), problem))
                continue
            if b not in have:
                have.add(b)
                records.append(frame(AccessControlEntryRecord(
                    id=uuid.uuid4(), resource_type=b.resource_type, resource_name=b.resource_name,
                    pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                    permission_type=b.permission)))
            results.append((0, None))
        return (frame_batch(records) if records else None), results

    def delete_acls(self, filters: Sequence[AclFilter]
                    ) -> tuple[bytes | None, list[tuple[int, str | None, list[AclBinding]]]]:
        """DeleteAcls: (entry, (error, message, the bindings it removes) per filter); a binding
        two filters match is removed once and listed by both, as Kafka answers."""
        removing: list[uuid.UUID] = []
        results: list[tuple[int, str | None, list[AclBinding]]] = []
        for flt in filters:
            problem = flt.problem()
            if problem is not None:
                results.append((int(ErrorCode.INVALID_REQUEST), problem, []))
                continue
            matched = [(i, b) for i, b in self.image.acls.items() if flt.matches(b)]
            removing += [i for i, _ in matched if i not in removing]
            results.append((0, None, [b for _, b in matched]))
        entry = frame_batch([frame(RemoveAccessControlEntryRecord(id=i)) for i in removing]) if removing else None
        return entry, results

    # ---- SCRAM credentials ------------------------------------------------------------------------
    def alter_scram(self, deletions: Sequence[tuple[str, int]], upsertions: Sequence[scram.Upsertion]
                    ) -> tuple[bytes | None, dict[str, tuple[int, str | None]]]:
        """(entry or None, each user's result): AlterUserScramCredentials (controller/scram.py)."""
        results, records = scram.decide(self.image.scram, deletions, upsertions)
        return (frame_batch([frame(r) for r in records]) if records else None), results

    def activate(self) -> bytes | None:
        """What a newly active controller writes first if the log lacks it (Kafka 4.1's activation
        records): the cluster-wide min.insync.replicas, from this node's static setting — so every
        broker, and every client describing a topic, sees one value for the cluster, and the ELR
        follows it (partition_change.py)."""
        if "min.insync.replicas" in self.image.broker_configs.get("", {}):
            return None
        return frame(ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="", name="min.insync.replicas",
                                  value=str(self.min_insync_replicas)))

    # ---- AlterPartition -----------------------------------------------------------------------------
    def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, partition: int,
                        leader_epoch: int, partition_epoch: int,
                        new_isr: Sequence[tuple[int, int]]) -> tuple[int, bytes | None]:
        """A leader's ISR change: (error, entry). `new_isr`: (broker id, broker epoch) for each
        member, -1 where the request does not say (before v3). Kafka's checks, in its order: the
        sender's broker epoch, the partition, the leader epoch, the partition epoch, the members.
        A member named with a broker epoch that is not its current registration's is ineligible
        (KIP-903): the leader saw a process that has since restarted, its log possibly torn."""
        b = self.image.broker(broker_id)
        if b is None or b.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, None
        t = self.image.topic_by_id(topic_id)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        if not 0 <= partition < len(t.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        p = t.partitions[partition]
        if p.leader != broker_id:
            return ErrorCode.INVALID_REQUEST, None
        if leader_epoch != p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if partition_epoch != p.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, None
        isr = list(dict.fromkeys(r for r, _ in new_isr))
        if broker_id not in isr or any(r not in p.replicas for r in isr):
            return ErrorCode.INVALID_REQUEST, None
        if any(r not in p.isr and not ((x := self.image.broker(r)) and x.live and self.image.replica_online(p, r))
               for r in isr):
            return ErrorCode.INELIGIBLE_REPLICA, None
        if any(e != -1 and not ((x := self.image.broker(r)) and x.epoch == e) for r, e in new_isr) \
                and not broken("kip903"):
            return ErrorCode.INELIGIBLE_REPLICA, None
        # the leader stays (it is in the new ISR and live); members leaving below min.insync.replicas
        # join the ELR, joining ones leave it (partition_change.py). An ISR as it was is still
        # committed (the partition epoch moves), as Ketch's leaders expect of an accepted request.
        change = build(t, partition, isr, self.image.live_brokers().__contains__,
                       min_isr(self.image, t, self.min_insync_replicas))
        return 0, framed(change or PartitionChangeRecord(partition_id=partition, topic_id=topic_id, isr=isr))

    def alter_partitions(self, broker_id: int, broker_epoch: int, changes: Sequence[IsrRequest]
                         ) -> tuple[bytes | None, list[int]]:
        """One AlterPartition request: (one entry for every accepted change, each change's error).
        Each partition is decided as alter_partition decides it, all on this image: they are
        different partitions (a partition named twice is refused the second time)."""
        seen: set[tuple[uuid.UUID, int]] = set()
        codes: list[int] = []
        records: list[bytes] = []
        for topic_id, partition, leader_epoch, partition_epoch, new_isr in changes:
            if (topic_id, partition) in seen:
                codes.append(ErrorCode.INVALID_REQUEST)
                continue
            seen.add((topic_id, partition))
            code, entry = self.alter_partition(broker_id, broker_epoch, topic_id, partition, leader_epoch,
                                               partition_epoch, new_isr)
            codes.append(code)
            if entry is not None:
                records.append(entry)
        return (frame_batch(records) if records else None), codes

    # ---- leader elections ---------------------------------------------------------------------------
    def elect_leaders(self, wanted: Sequence[TopicPartition] | None,
                      unclean: bool) -> tuple[bytes | None, dict[TopicPartition, ErrorCode]]:
        """ElectLeaders for `wanted` partitions (None: all): (entry, outcome per partition)."""
        image = self.image
        known = []
        outcome: dict[TopicPartition, ErrorCode] = {}
        pairs = wanted if wanted is not None else [TopicPartition(t.name, i) for t in image.topics.values()
                                                  for i in range(len(t.partitions))]
        for name, i in pairs:
            t = image.topics.get(name)
            if t is None or not 0 <= i < len(t.partitions):
                outcome[TopicPartition(name, i)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((t, i))
        changes, decided = elect(image, known, unclean, self.min_insync_replicas)
        outcome.update(decided)
        return (frame_batch([framed(c) for c in changes]) if changes else None), outcome

    def rebalance_leaders(self) -> bytes | None:
        """Kafka's auto leader rebalance: every partition whose preferred replica (the first) is
        live and in sync but does not lead gets it back."""
        image = self.image
        off = [(t, i) for t in image.topics.values() for i, p in enumerate(t.partitions)
               if p.replicas and p.leader != p.replicas[0]]
        changes, _ = elect(image, off, unclean=False)
        return frame_batch([framed(c) for c in changes]) if changes else None

    # ---- reassignment -------------------------------------------------------------------------------
    def reassign(self, wanted: Sequence[tuple[str, int, Sequence[int] | None]]
                 ) -> tuple[bytes | None, dict[TopicPartition, tuple[ErrorCode, str | None]]]:
        """AlterPartitionReassignments: (entry, outcome per partition); a None target cancels."""
        changes = []
        outcome: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for name, i, target in wanted:
            t = self.image.topics.get(name)
            if t is None or not 0 <= i < len(t.partitions):
                outcome[TopicPartition(name, i)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{i} does not exist")
                continue
            try:
                change = reassignment.start(self.image, t, i, target)
            except KafkaError as e:
                outcome[TopicPartition(name, i)] = (e.code, e.message)
                continue
            if change is not None:
                changes.append(framed(change))
            outcome[TopicPartition(name, i)] = (ErrorCode.NONE, None)
        return (frame_batch(changes) if changes else None), outcome

    def complete_reassignments(self) -> bytes | None:
        """The reassignments whose new replicas have all joined the ISR, finished."""
        changes = reassignment.completions(self.image, self.image.topics.values())
        return frame_batch([framed(c) for c in changes]) if changes else None
