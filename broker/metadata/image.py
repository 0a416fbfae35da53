"""MetadataImage: the committed metadata log, applied. Immutable: a record makes a new image.

Every broker (voter or not) applies the committed entries of the metadata quorum in order, so
every image at the same offset is the same: the producer-id blocks handed out, the registered
brokers, and the topics with their partitions (replicas, leader, epochs, ISR) and config overrides.
An entry may carry several records (a topic and its partitions); they are applied together or,
if one cannot be, not at all — an image is never half-applied.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from protocol.acl import AclBinding
from protocol.messages.metadata_records import (
    BROKER_RESOURCE,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
)
from protocol.scram import BY_TYPE as SCRAM_BY_TYPE
from protocol.scram import ScramCredential, b64, unb64
from storage.faults import broken

NO_LEADER = -1
# Kafka's reserved directory ids (DirectoryId): a replica not yet assigned to a directory (as every
# replica of a record older than KIP-858) counts as online; one whose directory is lost does not.
UNASSIGNED_DIR = uuid.UUID(int=0)
LOST_DIR = uuid.UUID(int=1)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker as the metadata log says: where clients reach it, and whether it may lead."""

    node_id: int
    epoch: int
    host: str  # the client listener (PLAINTEXT)
    port: int
    rack: str | None
    fenced: bool
    # the log offset a broker must have applied to be caught up (and be unfenced): its registration,
    # then its latest fence — whose entry moves its leaderships away, so that a broker that was cut
    # off or paused is not unfenced while it still believes it leads what others lead now
    registered_at: int
    inter_broker_host: str = ""  # the inter-broker listener (BROKER)
    inter_broker_port: int = 0
    in_controlled_shutdown: bool = False  # asked to stop: its leaderships are moved away
    # its log directories that are online, sorted (KIP-858); () when it never said (every one online)
    log_dirs: tuple[uuid.UUID, ...] = ()
    # every listener it registered, (name, host, port): clients are answered with the addresses of
    # the listener they came in on (several client listeners, docs/security.md)
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Its address on the listener named `listener`; None if it has no such listener."""
        return next(((h, p) for n, h, p in self.endpoints if n == listener), None)

    def address_for(self, listener: str, inter_broker: bool) -> tuple[str, int] | None:
        """Its address for a client that came in on `listener`, as Kafka answers: on the listener of
        the same name, None if it has none. A registration without listener names, or a connection
        on an unnamed listener: its inter-broker address to the inter-broker listener, else its client one."""
        if listener and self.endpoints:
            return self.endpoint(listener)
        return (self.inter_broker_host, self.inter_broker_port) if inter_broker else (self.host, self.port)

    @property
    def live(self) -> bool:
        """May lead and join an ISR: unfenced and not on its way out."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition as the controller committed it."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()  # a reassignment under way: replicas joining...
    removing: tuple[int, ...] = ()  # ...and leaving once those are in sync
    # KIP-966: replicas out of the ISR that still hold everything up to the high watermark (it does
    # not advance while the ISR is below min.insync.replicas), and so may be elected cleanly...
    elr: tuple[int, ...] = ()
    # ...and, once the ISR is empty, the leader it had then (Kafka's last known leader)
    last_known_elr: tuple[int, ...] = ()
    # the log directory each replica is in, in the replicas' order, as its broker reported it
    # (AssignReplicasToDirs, KIP-858); () while none is known
    directories: tuple[uuid.UUID, ...] = ()

    def directory(self, node: int) -> uuid.UUID:
        if not self.directories or node not in self.replicas:
            return UNASSIGNED_DIR
        return self.directories[self.replicas.index(node)]

    def with_directory(self, node: int, directory: uuid.UUID) -> tuple[uuid.UUID, ...]:
        dirs = list(self.directories or (UNASSIGNED_DIR,) * len(self.replicas))
        dirs[self.replicas.index(node)] = directory
        return tuple(dirs)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...] = ()
    configs: Mapping[str, str] = field(default_factory=dict)  # the topic's overrides


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # the last log offset applied
    next_producer_id: int = 0  # ids below this are handed out (ProducerIdsRecord)
    brokers: tuple[BrokerInfo, ...] = ()  # by node id
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)  # by name
    # dynamic broker configs by resource name: "" the cluster-wide default, "N" broker N's own
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the ACL bindings by the id their AccessControlEntryRecord gave them (the authorizer reads them)
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=dict)
    # SCRAM credentials by (user, mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512): the keys, never a password
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=dict)

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.scram.get((user, mechanism))

    def broker(self, node_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)

    def broker_config(self, node_id: int, name: str) -> str | None:
        """A dynamic broker config as broker `node_id` sees it: its own, else the cluster default."""
        own = self.broker_configs.get(str(node_id), {}).get(name)
        return own if own is not None else self.broker_configs.get("", {}).get(name)

    def live_brokers(self) -> list[int]:
        return [b.node_id for b in self.brokers if b.live]

    def replica_online(self, p: PartitionInfo, node: int) -> bool:
        """Whether `node`'s replica of `p` is in a log directory its broker has online (KIP-858):
        a replica in a failed directory may neither lead nor be in the ISR."""
        if not p.directories:
            return True
        d = p.directory(node)
        if d == UNASSIGNED_DIR:
            return True
        if d == LOST_DIR:
            return False
        b = self.broker(node)
        return b is None or not b.log_dirs or d in b.log_dirs

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def _with_broker(self, offset: int, info: BrokerInfo) -> MetadataImage:
        others = tuple(b for b in self.brokers if b.node_id != info.node_id)
        return replace(self, offset=offset, brokers=tuple(sorted(others + (info,), key=lambda b: b.node_id)))

    def _check_change(self, old: PartitionInfo, new: PartitionInfo) -> None:
        """ValueError for a change that does not follow from the partition it applies to.

        A PartitionChangeRecord sets leader and ISR as absolute values and, as in Kafka, does not
        say which partition epoch it was computed on, so two changes decided on one image combine
        into a state neither intended (a leader outside the ISR, a fenced broker back in it). The
        controller decides one change at a time on the latest image (controller/shell.py); this is
        what every broker checks of the result all the same, the same way on every broker: the
        leader is in the ISR (an empty ISR has no leader: KIP-966), the ISR and the ELR are among
        the replicas and apart, and whoever joins the ISR is live, its replica in a directory that
        is online."""
        if any(r not in new.replicas for r in new.isr) or any(r not in new.replicas or r in new.isr for r in new.elr):
            raise ValueError(f"partition change to ISR {list(new.isr)}, ELR {list(new.elr)} outside the replicas "
                             f"{list(new.replicas)} or overlapping")
        if new.leader != NO_LEADER and new.leader not in new.isr:
            raise ValueError(f"partition change to leader {new.leader} outside the ISR {list(new.isr)}")
        joining = [r for r in new.isr if r not in old.isr]
        if any(not ((b := self.broker(r)) and b.live and self.replica_online(new, r)) for r in joining):
            raise ValueError(f"partition change adds {joining} to the ISR {list(old.isr)}: not all are live "
                             "with their replica's log directory online")

    def to_snapshot(self) -> bytes:
        """The image as a quorum snapshot's payload (JSON: small, and readable when debugging)."""
        topics = [{"name": t.name, "topic_id": str(t.topic_id), "configs": dict(t.configs),
                   "partitions": [{**asdict(p), "directories": [str(d) for d in p.directories]}
                                  for p in t.partitions]} for t in self.topics.values()]
        brokers = [{**asdict(b), "log_dirs": [str(d) for d in b.log_dirs]} for b in self.brokers]
        acls = [{"id": str(i), **asdict(b)} for i, b in self.acls.items()]
        scram = [{"name": u, "mechanism": m, "salt": b64(c.salt), "stored_key": b64(c.stored_key),
                  "server_key": b64(c.server_key), "iterations": c.iterations} for (u, m), c in sorted(self.scram.items())]
        return json.dumps({"version": 5, "offset": self.offset, "next_producer_id": self.next_producer_id,
                           "brokers": brokers, "topics": topics,
                           "broker_configs": {k: dict(v) for k, v in self.broker_configs.items()}, "acls": acls,
                           "scram": scram},
                          sort_keys=True).encode()

    @classmethod
    def from_snapshot(cls, data: bytes) -> MetadataImage:
        raw = json.loads(data)
        if raw.pop("version", None) not in (1, 2, 3, 4, 5):
            raise ValueError("unknown metadata snapshot version")
        topics = {}
        for t in raw.get("topics", ()):
            parts = tuple(PartitionInfo(tuple(p["replicas"]), tuple(p["isr"]), p["leader"], p["leader_epoch"],
                                        p["partition_epoch"], tuple(p.get("adding", ())), tuple(p.get("removing", ())),
                                        tuple(p.get("elr", ())), tuple(p.get("last_known_elr", ())),
                                        tuple(uuid.UUID(d) for d in p.get("directories", ())))
                          for p in t["partitions"])
            topics[t["name"]] = TopicInfo(t["name"], uuid.UUID(t["topic_id"]), parts, dict(t["configs"]))
        return cls(offset=raw["offset"], next_producer_id=raw["next_producer_id"],
                   brokers=tuple(BrokerInfo(**{**b, "log_dirs": tuple(uuid.UUID(d) for d in b.get("log_dirs", ())),
                                               "endpoints": tuple(tuple(e) for e in b.get("endpoints", ()))})
                                 for b in raw.get("brokers", ())), topics=topics,
                   broker_configs={k: dict(v) for k, v in raw.get("broker_configs", {}).items()},
                   acls={uuid.UUID(a.pop("id")): AclBinding(**a) for a in raw.get("acls", ())},
                   scram={(c["name"], c["mechanism"]): ScramCredential(unb64(c["salt"]), unb64(c["stored_key"]),
                                                                       unb64(c["server_key"]), c["iterations"])
                          for c in raw.get("scram", ())})

    def apply_all(self, offset: int, records: Iterable[object]) -> MetadataImage:
        """The records of one entry, together: ValueError (and this image unchanged) if any fails."""
        image = self
        for r in records:
            image = image.apply(offset, r)
        return image

    def apply(self, offset: int, record: object) -> MetadataImage:
        if isinstance(record, NoOpRecord):
            return replace(self, offset=offset)
        if isinstance(record, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
            if record.mechanism not in SCRAM_BY_TYPE:
                raise ValueError(f"SCRAM credential of unknown mechanism {record.mechanism}")
            scram = {k: v for k, v in self.scram.items() if k != (record.name, record.mechanism)}
            if isinstance(record, UserScramCredentialRecord):
                scram[(record.name, record.mechanism)] = ScramCredential(
                    bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations)
            return replace(self, offset=offset, scram=scram)
        if isinstance(record, ConfigRecord) and record.resource_type == BROKER_RESOURCE:
            if record.resource_name != "" and not record.resource_name.isdigit():
                raise ValueError(f"broker config record for resource {record.resource_name!r}")
            configs = dict(self.broker_configs.get(record.resource_name, {}))
            if record.value is None:
                configs.pop(record.name, None)
            else:
                configs[record.name] = record.value
            out = {k: v for k, v in self.broker_configs.items() if k != record.resource_name}
            if configs:
                out[record.resource_name] = configs
            return replace(self, offset=offset, broker_configs=out)
        if isinstance(record, TopicRecord | PartitionRecord | PartitionChangeRecord | ConfigRecord | RemoveTopicRecord):
            topics = _apply_topic_record(self.topics, record)
            if isinstance(record, PartitionChangeRecord) and not broken("registration-serial"):
                t = _find(topics, record.topic_id)
                self._check_change(self.topics[t.name].partitions[record.partition_id],
                                   t.partitions[record.partition_id])
            return replace(self, offset=offset, topics=topics)
        if isinstance(record, AccessControlEntryRecord):
            if record.id in self.acls:
                raise ValueError(f"ACL {record.id} exists already")
            binding = AclBinding(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                                 record.host, record.operation, record.permission_type)
            return replace(self, offset=offset, acls={**self.acls, record.id: binding})
        if isinstance(record, RemoveAccessControlEntryRecord):
            if record.id not in self.acls:
                raise ValueError(f"no ACL {record.id} to remove")
            return replace(self, offset=offset, acls={i: b for i, b in self.acls.items() if i != record.id})
        if isinstance(record, BrokerRegistrationChangeRecord):
            b = self.broker(record.broker_id)
            if b is None or b.epoch != record.broker_epoch:
                raise ValueError(f"registration change for broker {record.broker_id} epoch {record.broker_epoch}, "
                                 f"registered: {b}")
            fenced = {1: True, -1: False}.get(record.fenced, b.fenced)
            shutting = b.in_controlled_shutdown or record.in_controlled_shutdown == 1
            log_dirs = tuple(sorted(record.log_dirs)) if record.log_dirs else b.log_dirs  # empty: unchanged
            return self._with_broker(offset, replace(b, fenced=fenced, in_controlled_shutdown=shutting,
                                                     log_dirs=log_dirs))
        if isinstance(record, ProducerIdsRecord):
            if record.next_producer_id <= self.next_producer_id:
                raise ValueError(f"producer-id block ending at {record.next_producer_id} does not follow "
                                 f"{self.next_producer_id}")
            return replace(self, offset=offset, next_producer_id=record.next_producer_id)
        if isinstance(record, RegisterBrokerRecord):
            ends = {e.name: (e.host, e.port) for e in record.end_points}
            first_client = next((e for e in ends if e != "BROKER"), "PLAINTEXT")
            host, port = ends.get("PLAINTEXT", ends.get(first_client, ("", 0)))
            ib_host, ib_port = ends.get("BROKER", ("", 0))
            return self._with_broker(offset, BrokerInfo(record.broker_id, record.broker_epoch, host, port, record.rack,
                                                        record.fenced, offset, ib_host, ib_port,
                                                        log_dirs=tuple(sorted(record.log_dirs)),
                                                        endpoints=tuple((e.name, e.host, e.port)
                                                                        for e in record.end_points)))
        if isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
            b = self.broker(record.id)
            if b is None or b.epoch != record.epoch:
                raise ValueError(f"{type(record).__name__} for broker {record.id} epoch {record.epoch}, "
                                 f"registered: {b}")
            if isinstance(record, FenceBrokerRecord):
                return self._with_broker(offset, replace(b, fenced=True, registered_at=offset))
            return self._with_broker(offset, replace(b, fenced=False))
        raise ValueError(f"no rule to apply {type(record).__name__}")


def _directories(dirs: Iterable[uuid.UUID], replicas: Iterable[int]) -> tuple[uuid.UUID, ...]:
    """A record's directories, one per replica (KIP-858); none (v0) is ()."""
    out, n = tuple(dirs), len(tuple(replicas))
    if out and len(out) != n:
        raise ValueError(f"{len(out)} directories for {n} replicas")
    return out


def _find(topics: Mapping[str, TopicInfo], topic_id: uuid.UUID) -> TopicInfo:
    t = next((t for t in topics.values() if t.topic_id == topic_id), None)
    if t is None:
        raise ValueError(f"no topic with id {topic_id}")
    return t


def _apply_topic_record(topics: Mapping[str, TopicInfo], record: Any) -> dict[str, TopicInfo]:
    """A new topics mapping (the untouched topics shared with the old one)."""
    out = dict(topics)
    if isinstance(record, TopicRecord):
        if record.name in out or any(t.topic_id == record.topic_id for t in out.values()):
            raise ValueError(f"topic {record.name} ({record.topic_id}) exists already")
        out[record.name] = TopicInfo(record.name, record.topic_id)
    elif isinstance(record, RemoveTopicRecord):
        del out[_find(out, record.topic_id).name]
    elif isinstance(record, ConfigRecord):
        if record.resource_type != TOPIC_RESOURCE:
            raise ValueError(f"config record for resource type {record.resource_type}")
        t = out.get(record.resource_name)
        if t is None:
            raise ValueError(f"config record for unknown topic {record.resource_name}")
        configs = dict(t.configs)
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        out[t.name] = replace(t, configs=configs)
    elif isinstance(record, PartitionRecord):
        t = _find(out, record.topic_id)
        if record.partition_id != len(t.partitions):
            raise ValueError(f"partition {record.partition_id} of {t.name} does not follow its "
                             f"{len(t.partitions)} partitions")
        p = PartitionInfo(tuple(record.replicas), tuple(record.isr), record.leader, record.leader_epoch,
                          record.partition_epoch, tuple(record.adding_replicas), tuple(record.removing_replicas),
                          tuple(record.eligible_leader_replicas or ()), tuple(record.last_known_elr or ()),
                          _directories(record.directories, record.replicas))
        out[t.name] = replace(t, partitions=t.partitions + (p,))
    else:
        assert isinstance(record, PartitionChangeRecord)
        t = _find(out, record.topic_id)
        if not 0 <= record.partition_id < len(t.partitions):
            raise ValueError(f"change to partition {record.partition_id} of {t.name}, which has "
                             f"{len(t.partitions)} partitions")
        old = t.partitions[record.partition_id]
        leader_changed = record.leader != NO_LEADER_CHANGE
        replicas = tuple(record.replicas) if record.replicas is not None else old.replicas
        if record.directories is not None:
            directories = _directories(record.directories, replicas)
        elif record.replicas is not None and old.directories:  # replicas that stay keep theirs
            directories = tuple(old.directory(r) for r in replicas)
        else:
            directories = old.directories
        new = PartitionInfo(
            replicas=replicas,
            isr=tuple(record.isr) if record.isr is not None else old.isr,
            leader=record.leader if leader_changed else old.leader,
            leader_epoch=old.leader_epoch + 1 if leader_changed else old.leader_epoch,
            partition_epoch=old.partition_epoch + 1,
            adding=tuple(record.adding_replicas) if record.adding_replicas is not None else old.adding,
            removing=tuple(record.removing_replicas) if record.removing_replicas is not None else old.removing,
            elr=tuple(record.eligible_leader_replicas) if record.eligible_leader_replicas is not None else old.elr,
            last_known_elr=tuple(record.last_known_elr) if record.last_known_elr is not None else old.last_known_elr,
            directories=directories)
        parts = list(t.partitions)
        parts[record.partition_id] = new
        out[t.name] = replace(t, partitions=tuple(parts))
    return out
