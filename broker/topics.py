"""The topics this broker holds: the metadata image's topics, and the logs of the partitions
this broker is a replica of.

What topics exist, their partitions' replicas, leaders and ISRs, and their config overrides are
the metadata log's (broker/metadata/image.py): every change goes to the active controller —
on this node when its quorum leads, else forwarded over the controller listener — and this table
follows the committed image (`apply_image`): it opens the logs of the partitions assigned here,
hands each its leadership or followership, closes and deletes the logs of deleted topics. A
topics.json left by a Ketch before the quorum is turned into metadata records once and renamed.

Opening a log is disk work — a new one creates its directory and files and fsyncs them and its
parent, an existing one is read back and recovered — and a topic of hundreds of partitions
opened on the event loop stalled it for seconds (11-14 s under the fuzzer's load: the broker lost
its session). So a log opens on its log directory's I/O thread (`Opening`), and the partition
joins the table, leading or following as the image says *then*, once it is open; meanwhile it
answers NOT_LEADER_OR_FOLLOWER, as Kafka does for a replica not ready yet. Opens of one
partition run one after the other: a topic deleted while its log opens has that log removed
once the open ends, before the log of a topic created again under the name is opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog

from protocol.clock import Clock
from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig
from storage.fs import OS_FS, FileSystem
from storage.log import PartitionLog

from .config import BrokerConfig, ConfigError
from .config_catalog import TOPIC_CONFIGS, check_value
from .controller.placement import check_assignment
from .group_commit import GroupCommit
from .log_dirs import DELETE_SUFFIX, Key, LogDir, LogDirs, partition_key
from .log_io import LogIO
from .metadata import dynamic_configs
from .metadata.image import LOST_DIR, MetadataImage, PartitionInfo, TopicInfo
from .partition import Partition
from .partition.move import MoveThrottle, ReplicaMove
from .partition.replica_state import NO_LEADER, Assignment

log = structlog.get_logger()

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LEN = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# 2: the internal topics hold Kafka's records (OffsetCommitKey/Value, TransactionLogKey/Value, ...).
TOPICS_FILE_VERSION = 2

MAX_PARTITIONS = 100_000


def remove_replica_dir(fs: FileSystem, directory: Path) -> None:
    """Retire a replica's directory durably under a `-delete` name (what a start removes: a
    crash part way through the removal leaves nothing a later replica of the name would load),
    then remove it."""
    retired = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
    try:
        fs.rename(directory, retired)
    except FileNotFoundError:
        return
    fs.fsync_dir(directory.parent)
    fs.remove_tree(retired)


def validate_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_LEN or not LEGAL_TOPIC.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} must be 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'")


WAIT_FOR_IMAGE_S = 10.0


@dataclass(eq=False)
class Opening:
    """A replica's log being opened on its log directory's I/O thread."""

    topic_id: uuid.UUID
    log_dir: LogDir
    config: LogConfig  # the topic's when the open was asked for (the partition takes the newest when open)
    task: asyncio.Task[None] | None = None
    wanted: bool = True  # False once the image no longer assigns it here: removed once it is open
    stopped: bool = False  # the broker is stopping: not opened at all if not begun
    part: Partition | None = None  # the log once open (set on the I/O thread)


@dataclass
class Topic:
    """A topic as this broker knows it: the image's view, and the logs it holds."""

    name: str
    topic_id: uuid.UUID
    info: TopicInfo
    local: dict[int, Partition] = field(default_factory=dict)  # the partitions this broker is a replica of

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def configs(self) -> Mapping[str, str]:
        return self.info.configs

    @property
    def num_partitions(self) -> int:
        return len(self.info.partitions)

    @property
    def partitions(self) -> list[Partition]:
        """The partition logs held here, by index."""
        return [self.local[i] for i in sorted(self.local)]


class TopicWriter(Protocol):
    """Where topic changes go: the active controller (broker/controller/client.py)."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                           assignments: Sequence[Sequence[int]] | None) -> None: ...

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> None: ...

    async def delete_topic(self, name: str) -> None: ...

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    async def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> None: ...


# (topic, partition log, leads it): a partition this broker became leader or follower of -- or,
# with False and its log closed, one whose replica went (deleted, moved away, offline).
LeadershipListener = Callable[[str, Partition, bool], None]


class TopicTable:
    """Creates, finds, loads and deletes topics and their partition logs."""

    def __init__(self, cfg: BrokerConfig, clock: Clock, fs: FileSystem = OS_FS) -> None:
        self.cfg = cfg
        self.clock = clock
        self.fs = fs  # every partition log's files go through it
        self.log_dirs = LogDirs([os.path.abspath(p) for p in cfg.log_dir_paths], os.path.abspath(cfg.metadata_dir),
                                cfg.node_id, cfg.cluster_id, fs, "log_dirs" if cfg.log_dirs else "data_dir")
        self.meta_file = Path(cfg.metadata_dir) / "topics.json"
        self.moves: dict[Key, ReplicaMove] = {}  # replicas moving to another log directory
        rate = cfg.replica_alter_log_dirs_io_max_bytes_per_second
        self.move_throttle = MoveThrottle(rate, clock) if rate > 0 else None  # one quota for every move
        self.offline: set[Key] = set()  # replicas assigned here whose log directory failed
        # False until this broker is registered: a replica not found while a log directory is
        # unreadable since the start may be in it, and is not created elsewhere (log_dirs.holds_unknown).
        self.started = False
        self.on_metadata_dir_failure: Callable[[], None] | None = None  # the server stops the broker
        self.on_log_dir_failure: Callable[[], None] | None = None  # the controller is to hear of it now
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.group_commit = GroupCommit()  # shared by every partition: one sync of each log at a time
        self.group_commit.on_error = self._sync_failed
        # One I/O thread per log directory: the opening of its logs and their checkpoints,
        # snapshots and sealed indexes, off the loop, a slow disk delaying only its own logs.
        self._ios: dict[Path, LogIO] = {}
        self.opening: dict[Key, Opening] = {}  # replicas whose log is being opened (the newest open of each)
        # every open not ended (an older one of a partition too), in the order begun
        self._opens: dict[Opening, None] = {}
        self._disk: dict[Key, asyncio.Task[None]] = {}  # each partition's last open or removal: the next waits for it
        self._closing = False
        self._internal: dict[str, asyncio.Task[None]] = {}  # internal topics being created here (ensure_internal)
        self.image = MetadataImage()
        # False from a restart until this broker has applied its own registration (server.py): the
        # image replayed from the local metadata log may still name it leader at an epoch its
        # (possibly torn) log no longer matches; the registration entry moves those leaderships.
        self.may_lead = True
        self.writer: TopicWriter | None = None
        self.listeners: list[LeadershipListener] = []
        self._changed = asyncio.Event()  # set (and replaced) whenever the image changes

    def broker_defaults(self) -> dict[str, tuple[str, str]]:
        """Topic configs whose default comes from a broker setting that differs from Kafka's
        default: topic config -> (Kafka's name of the broker setting, value). DescribeConfigs
        reports these as STATIC_BROKER_CONFIG, the rest as DEFAULT_CONFIG."""
        c = self.cfg
        derived = {
            "retention.ms": ("log.retention.ms", c.log_retention_ms),
            "retention.bytes": ("log.retention.bytes", c.log_retention_bytes),
            "segment.bytes": ("log.segment.bytes", c.log_segment_bytes),
            "segment.ms": ("log.roll.ms", c.log_segment_ms),
            "max.message.bytes": ("message.max.bytes", c.message_max_bytes),
            "flush.messages": ("log.flush.interval.messages", c.flush_messages),
            "flush.ms": ("log.flush.interval.ms", c.flush_ms),
            "min.insync.replicas": ("min.insync.replicas", c.min_insync_replicas),
        }
        return {k: (name, str(v)) for k, (name, v) in derived.items()
                if v is not None and str(v) != TOPIC_CONFIGS[k].default}

    def dynamic_defaults(self) -> dict[str, tuple[str, str, int]]:
        """Topic config -> (broker setting, value, source) that the dynamic broker configs in the
        metadata log set for this broker (broker/metadata/dynamic_configs.py)."""
        return dynamic_configs.topic_defaults(self.image, self.cfg.node_id)

    def effective_configs(self, configs: Mapping[str, str]) -> dict[str, str]:
        """Every topic config: the topic's override, else the dynamic broker config (this broker's,
        then the cluster-wide default), else the broker's static setting, else Kafka's default."""
        out = {name: d.default for name, d in TOPIC_CONFIGS.items()}
        out.update({k: v for k, (_, v) in self.broker_defaults().items()})
        out.update({k: v for k, (_, v, _) in self.dynamic_defaults().items()})
        out.update(configs)
        return out

    def log_config(self, configs: Mapping[str, str]) -> LogConfig:
        e = self.effective_configs(configs)
        big = 9223372036854775807
        flush_messages = int(e["flush.messages"])
        flush_ms = int(e["flush.ms"])
        return LogConfig(
            segment_bytes=int(e["segment.bytes"]),
            segment_ms=int(e["segment.ms"]),
            retention_ms=int(e["retention.ms"]),
            retention_bytes=int(e["retention.bytes"]),
            index_interval_bytes=int(e["index.interval.bytes"]),
            max_index_size=int(e["segment.index.bytes"]),
            flush_messages=None if flush_messages >= big else flush_messages,
            flush_ms=None if flush_ms >= big else flush_ms,
            cleanup_policy=",".join(p.strip() for p in e["cleanup.policy"].split(",") if p.strip()),
            message_timestamp_type=e["message.timestamp.type"],  # type: ignore[arg-type]
            delete_retention_ms=int(e["delete.retention.ms"]),
            min_cleanable_dirty_ratio=float(e["min.cleanable.dirty.ratio"]),
            producer_id_expiration_ms=self.cfg.producer_id_expiration_ms,
            max_message_bytes=int(e["max.message.bytes"]),
            min_insync_replicas=int(e["min.insync.replicas"]),
        )

    def io(self, d: LogDir) -> LogIO:
        """The I/O thread of log directory `d`."""
        io = self._ios.get(d.path)
        if io is None:
            io = self._ios[d.path] = LogIO()
        return io

    def io_of(self, part: Partition) -> LogIO:
        """The I/O thread of the log directory holding `part`'s log."""
        d = self.log_dirs.by_path(str(part.directory.parent))
        return self.io(d) if d is not None else self.io(self.log_dirs.dirs[0])

    def _begin_open(self, topic: Topic, index: int, config: LogConfig) -> None:
        """Open the replica's log — in the log directory that holds it, else in the one placement
        chooses (broker/log_dirs.py) — on that directory's I/O thread, after any open of the same
        partition still under way. Raises OSError if no log directory is online."""
        key = (topic.name, index)
        d = self.log_dirs.locate(key) or self.log_dirs.place(key)
        op = Opening(topic.topic_id, d, config)
        previous = self._disk.get(key)
        self.opening[key] = op
        self._opens[op] = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a table driven without a loop (tools, tests): open at once
            try:
                part = self._open_log(key, op)
            except OSError as e:
                self._opened(key, op, None)
                self.fail_log_dir(d, f"opening {key[0]}-{key[1]}: {e}")
                return
            self._opened(key, op, part)
            return
        op.task = loop.create_task(self._open(key, op, previous))
        self._track(key, op.task)

    def _track(self, key: Key, task: asyncio.Task[None]) -> None:
        self._disk[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._disk.get(key) is t:
                del self._disk[key]
                self._wake()  # what waits for the partition's disk work (`_disk_work_done`) looks again

        task.add_done_callback(done)

    def _open_log(self, key: Key, op: Opening) -> Partition | None:
        """On the I/O thread: the log opened (None: not wanted any more, its directory removed)."""
        if op.stopped:
            return None
        if not op.wanted:
            remove_replica_dir(self.fs, op.log_dir.path / f"{key[0]}-{key[1]}")
            return None
        part = Partition.open(op.log_dir.path, key[0], key[1], op.config, self.cfg.node_id, self.clock,
                              self.group_commit, self.cfg.replica_lag_time_max_ms, fs=self.fs,
                              offload=self.io(op.log_dir))
        op.part = part
        return part

    async def _open(self, key: Key, op: Opening, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # an older log of the partition removed first
        if self._closing:
            return
        io = self.io(op.log_dir)
        try:
            part = await io.run(lambda: self._open_log(key, op))
        except OSError as e:
            self._opened(key, op, None)
            if not self._closing:
                self.fail_log_dir(op.log_dir, f"opening {key[0]}-{key[1]}: {e}")
            return
        if part is not None and not op.wanted and not self._closing:  # deleted or moved away meanwhile
            try:
                await io.run(lambda: self._discard(part))
            except OSError as e:
                self.fail_log_dir(op.log_dir, f"removing {key[0]}-{key[1]}: {e}")
        self._opened(key, op, part)

    def _discard(self, part: Partition) -> None:
        """On the I/O thread: a log opened for nothing (its replica no longer here) removed."""
        part.discard()
        remove_replica_dir(self.fs, part.directory)

    def _opened(self, key: Key, op: Opening, part: Partition | None) -> None:
        """Back on the loop: the partition joins the table as the image says now, unless the
        image no longer assigns it here or its log directory failed meanwhile."""
        if self.opening.get(key) is op:
            del self.opening[key]
        if self._closing:
            return  # table.close() closes it
        self._opens.pop(op, None)
        if part is None or not op.wanted:
            self._wake()
            return
        name, i = key
        topic = self.by_name.get(name)
        if key in self.offline or not op.log_dir.online or topic is None or topic.topic_id != op.topic_id:
            part.go_offline()  # its directory failed: closed without another write
            self._wake()
            return
        pinfo = topic.info.partitions[i]
        lc = self.log_config(topic.info.configs)
        if part.config != lc:
            part.update_config(lc)
        part.on_storage_error = self._storage_error
        topic.local[i] = part
        resume = self.log_dirs.resume.pop(key, None)
        if resume is not None and resume.online and part.directory.parent != resume.path:
            self._start_move(part, resume, resume=True)  # a move a stop interrupted goes on
        part.set_ineligible(frozenset(b.node_id for b in self.image.brokers if not b.live))
        self._lead_or_follow(part, pinfo)
        self._wake()

    def _abandon_open(self, key: Key) -> None:
        """The image no longer assigns the replica here: a log being opened for it is removed
        once open (or not opened at all, its directory removed, if not begun)."""
        op = self.opening.get(key)
        if op is not None:
            op.wanted = False

    def busy(self, name: str) -> bool:
        """A log of topic `name` is being opened or removed here."""
        return any(k[0] == name for k in self._disk)

    async def settled(self) -> None:
        """Until no log is being opened or removed (those asked for meanwhile too)."""
        while tasks := [t for t in self._disk.values() if not t.done()]:
            await asyncio.wait(tasks)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- a log directory whose disk fails (Kafka's LogDirFailureChannel) ---------------------------
    def _storage_error(self, part: Partition, error: OSError) -> None:
        d = self.log_dirs.locate((part.topic, part.index))
        if d is not None and d.path == part.directory.parent:
            self.fail_log_dir(d, f"{part.topic}-{part.index}: {error}")

    def _sync_failed(self, plog: PartitionLog, error: BaseException) -> None:
        """A sync or flush on group commit's thread failed."""
        key = partition_key(plog.directory.name)
        part = None if key is None else self.partition(*key)
        if part is not None and part.holds(plog) and isinstance(error, OSError):
            self._storage_error(part, error)

    def fail_log_dir(self, d: LogDir, reason: str) -> None:
        """Take `d` offline with every replica in it, as Kafka does on an I/O error there: their
        logs are closed without another write, produce and fetch for them answer
        KAFKA_STORAGE_ERROR, moves to or from `d` stop; the other directories go on, and the
        controller hears of it (broker/lifecycle.py) and moves the ISR places and leaderships of
        the replicas here to other brokers. The metadata log's directory failing, or the last
        one online, stops the broker (Kafka halts too)."""
        was_online = d.online
        for key in self.log_dirs.fail(d, reason):
            self._stop_move(key)
            if self.log_dirs.locate(key) is d:
                self._take_offline(key)
        for key, move in list(self.moves.items()):
            if move.destination is d or move.part.directory.parent == d.path:
                self._stop_move(key)
        lost = d.path == self.log_dirs.metadata_dir or not any(x.online for x in self.log_dirs.dirs)
        if lost and self.on_metadata_dir_failure is not None:
            self.on_metadata_dir_failure()
        elif was_online and self.on_log_dir_failure is not None:
            self.on_log_dir_failure()

    def dir_assignments(self) -> dict[uuid.UUID, dict[uuid.UUID, list[int]]]:
        """Replicas here whose log directory the committed image does not show (AssignReplicasToDirs,
        KIP-858): directory id -> topic id -> partitions. A replica offline without a directory
        (one unreadable since the start may hold it) is Kafka's LOST directory. Only with several
        log directories: with one, a failed directory stops the broker."""
        if len(self.log_dirs.dirs) < 2:
            return {}
        node = self.cfg.node_id
        out: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        placed = {k: d.dir_id for k, d in self.log_dirs.where.items()}
        placed.update({k: LOST_DIR for k in self.offline if k not in placed})
        for (name, i), dir_id in placed.items():
            t = self.image.topics.get(name)
            if dir_id is None or t is None or i >= len(t.partitions) or node not in t.partitions[i].replicas:
                continue
            if t.partitions[i].directory(node) != dir_id:
                out.setdefault(dir_id, {}).setdefault(t.topic_id, []).append(i)
        return out

    def _take_offline(self, key: Key) -> None:
        self.offline.add(key)  # a log being opened for it goes offline once open (`_opened`)
        topic = self.by_name.get(key[0])
        part = None if topic is None else topic.local.pop(key[1], None)
        if part is None:
            return
        part.go_offline()
        log.error("partition offline: its log directory failed", topic=part.topic, partition=part.index,
                  log_dir=str(part.directory.parent))
        for listener in self.listeners:
            listener(part.topic, part, False)  # coordinators unload it; nothing fetches it

    def _remove_replica(self, topic: Topic, index: int) -> None:
        """Delete the replica's log here (its topic deleted, or moved to other brokers): out of
        the table at once, closed without writing (its files go), its directory removed on the
        log directory's I/O thread — a topic of hundreds of partitions closed and removed on the
        loop held it for seconds."""
        key = (topic.name, index)
        self._stop_move(key)
        self._abandon_open(key)
        part = topic.local.pop(index, None)
        if part is not None:
            part.discard()
            self._remove_dir(key, part.directory)
            # The coordinators forget what the replica held, as for a leadership gone elsewhere:
            # kept, a coordinator moved off by a reassignment went on as a second one beside the
            # new (its reaper deciding from old state; simulation fault `reap-flip`).
            for listener in self.listeners:
                listener(part.topic, part, False)
        self.log_dirs.forget(key)

    def _remove_dir(self, key: Key, directory: Path) -> None:
        d = self.log_dirs.by_path(str(directory.parent))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (tools, tests): at once
            remove_replica_dir(self.fs, directory)
            return
        if d is None:
            return
        self._track(key, loop.create_task(self._remove(d, directory, self._disk.get(key))))

    async def _remove(self, d: LogDir, directory: Path, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        if self._closing:
            return  # left for the next start (remove_orphans; a retired `-delete` at the scan)
        try:
            await self.io(d).run(lambda: remove_replica_dir(self.fs, directory))
        except OSError as e:
            log.warning("removing a replica's directory failed", directory=str(directory), error=str(e))

    # ---- moving replicas between log directories (AlterReplicaLogDirs) --------------------------------
    def alter_log_dir(self, topic: str, index: int, path: str) -> ErrorCode:
        """Move the replica to the log directory `path` (Kafka's ReplicaManager.alterReplicaLogDirs):
        a directory not configured is LOG_DIR_NOT_FOUND, an offline one (or a move while any is
        offline: the replica might have a copy there) KAFKA_STORAGE_ERROR. A replica not here yet is
        created there later, answering REPLICA_NOT_AVAILABLE now. Asking for another destination
        stops a move under way; asking for the directory the replica is in ends the matter."""
        key = (topic, index)
        d = self.log_dirs.by_path(path)
        if d is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not d.online:
            return ErrorCode.KAFKA_STORAGE_ERROR
        move = self.moves.get(key)
        if move is not None and move.destination is not d:
            self._stop_move(key)
        part = self.partition(topic, index)
        if part is None and key in self.opening:
            return ErrorCode.REPLICA_NOT_AVAILABLE  # being opened here: asked again, it moves
        if part is None:
            if not self.exists(topic, index):
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            self.log_dirs.prefer(key, d)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if part.directory.parent == d.path or key in self.moves:
            return ErrorCode.NONE
        if any(not x.online for x in self.log_dirs.dirs):
            return ErrorCode.KAFKA_STORAGE_ERROR
        self._start_move(part, d)
        return ErrorCode.NONE

    def _start_move(self, part: Partition, d: LogDir, resume: bool = False) -> None:
        self.moves[(part.topic, part.index)] = ReplicaMove(
            part, d, self.log_dirs, self.fs, self.io(d), self.group_commit, self.clock.now_ms, self._move_done,
            self.fail_log_dir, self.move_throttle, resume)

    def _move_done(self, move: ReplicaMove) -> None:
        if self.moves.get(move.key) is move:
            del self.moves[move.key]

    def _stop_move(self, key: Key) -> None:
        move = self.moves.pop(key, None)
        if move is not None:
            move.cancel()

    # ---- following the metadata image ---------------------------------------------------------------
    def load(self) -> None:
        """Prepare the log directories and find the partitions each holds (the logs open as the
        metadata image names them). Blocking: run in a thread at start."""
        self.log_dirs.prepare()

    def legacy_topics(self) -> list[dict[str, Any]]:
        """The topics of a topics.json written before the metadata quorum (to be migrated)."""
        if not self.meta_file.exists():
            return []
        data = json.loads(self.meta_file.read_text())
        self._refuse_old_internal_layout(data)
        return list(data["topics"])

    def retire_legacy_file(self) -> None:
        self.meta_file.rename(self.meta_file.with_suffix(".json.migrated"))
        log.info("topics.json migrated into the metadata log", renamed_to=self.meta_file.name + ".migrated")

    def apply_image(self, image: MetadataImage) -> None:
        """Make the local logs what the committed image says."""
        old, self.image = self.image, image
        node = self.cfg.node_id
        defaults_changed = old.broker_configs != image.broker_configs
        for name in [n for n in self.by_name if n not in image.topics or
                     image.topics[n].topic_id != self.by_name[n].topic_id]:
            self._drop(self.by_name[name])
        for name, info in image.topics.items():
            topic = self.by_name.get(name)
            if topic is None:
                topic = Topic(name, info.topic_id, info)
                self._index(topic)
            before = topic.info
            topic.info = info
            if before is info and name in old.topics and not defaults_changed:
                continue
            lc = self.log_config(info.configs)
            if before.configs != info.configs or defaults_changed:
                for p in topic.local.values():
                    p.update_config(lc)
            for i, pinfo in enumerate(info.partitions):
                if i < len(before.partitions) and before.partitions[i] == pinfo and i in topic.local:
                    continue
                part = topic.local.get(i)
                if node not in pinfo.replicas:
                    self.offline.discard((name, i))
                    if part is not None:  # moved away (reassignment): the data is the new replicas'
                        self._remove_replica(topic, i)
                    continue
                if (name, i) in self.offline:
                    continue
                if part is None:
                    op = self.opening.get((name, i))
                    if op is not None and op.wanted and op.topic_id == info.topic_id:
                        continue  # it leads or follows as the image says once it is open
                    if not self.started and self.log_dirs.holds_unknown((name, i)):
                        self._take_offline((name, i))
                        log.error("partition offline: not found, and a log directory unreadable since the start "
                                  "may hold it", topic=name, partition=i)
                        continue
                    try:
                        self._begin_open(topic, i, lc)
                    except OSError:
                        pass  # no log directory online (the broker stops)
                    continue
                self._lead_or_follow(part, pinfo)
        if old.brokers != image.brokers or old.topics is not image.topics:
            # fenced or stopping brokers may not (re)join an ISR (KIP-841)
            out = frozenset(b.node_id for b in image.brokers if not b.live)
            for t in self.by_name.values():
                for part in t.local.values():
                    part.set_ineligible(out)
        self._wake()

    def _lead_or_follow(self, part: Partition, p: PartitionInfo) -> None:
        mine = p.leader == self.cfg.node_id
        leads = mine and self.may_lead
        a = Assignment(p.replicas, frozenset(p.isr), NO_LEADER if mine and not leads else p.leader,
                       p.leader_epoch, p.partition_epoch)
        if leads:
            part.become_leader(a)
        else:
            part.become_follower(a)
        for listener in self.listeners:
            listener(part.topic, part, leads)

    def allow_leading(self) -> None:
        """The broker has applied its registration: take up the leaderships the image gives it."""
        self.started = True
        if self.may_lead:
            return
        self.may_lead = True
        for name, topic in self.by_name.items():
            for i, part in topic.local.items():
                info = self.image.topics.get(name)
                if info is not None and i < len(info.partitions) and info.partitions[i].leader == self.cfg.node_id:
                    self._lead_or_follow(part, info.partitions[i])

    def _drop(self, topic: Topic) -> None:
        del self.by_name[topic.name]
        self.by_id.pop(topic.topic_id, None)
        self.offline = {k for k in self.offline if k[0] != topic.name}
        opening = [i for (name, i), op in self.opening.items() if name == topic.name and op.topic_id == topic.topic_id]
        for i in sorted({*topic.local, *opening}):
            self._remove_replica(topic, i)
        log.info("topic deleted", topic=topic.name)

    def remove_orphans(self) -> None:
        """Delete partition directories the image does not assign here: a topic deleted while
        this broker was down, or a delete that crashed between the record and the directories —
        a topic created later under the same name must not find that data."""
        node = self.cfg.node_id
        for d in self.log_dirs.dirs:
            if not d.online:
                continue
            for entry in sorted(self.fs.listdir(d.path)):
                key = partition_key(entry)
                if key is None:
                    continue  # not a partition directory (the files here have no such names)
                name, i = key
                if key in self.opening:
                    continue  # its open removes it if it is not wanted
                info = self.image.topics.get(name)
                if info is None or i >= len(info.partitions) or node not in info.partitions[i].replicas:
                    log.warning("removing the directory of a partition not assigned here", directory=entry,
                                log_dir=str(d.path))
                    topic = self.by_name.get(name)
                    if topic is not None and i in topic.local:
                        topic.local.pop(i).close()
                    self.log_dirs.forget(key)
                    self.fs.remove_tree(d.path / entry)

    async def wait_for(self, done: Callable[[], bool], what: str, timeout: float = WAIT_FOR_IMAGE_S) -> None:
        """Until the local image satisfies `done` (a change the controller committed reaches this
        broker a moment later): REQUEST_TIMED_OUT after `timeout`."""
        deadline = self.clock.monotonic() + timeout
        while not done():
            left = deadline - self.clock.monotonic()
            if left <= 0:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{what}: committed, but not yet applied on this broker")
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    def _refuse_old_internal_layout(self, data: dict[str, Any]) -> None:
        """Before version 2 of topics.json, `__consumer_offsets` and `__transaction_state` held
        records in a layout of Ketch's own. Read as Kafka's records they would be misread (an
        old offset value v0 parses as Kafka's v0 with other fields), so refuse to start."""
        if data.get("version", 1) >= TOPICS_FILE_VERSION:
            return
        for t in data["topics"]:
            if t["name"] in INTERNAL_TOPICS:
                raise ConfigError(
                    "data_dir", str(self.meta_file.parent),
                    f"topic {t['name']} holds records in the layout of Ketch before Kafka's internal-topic "
                    "formats (docs/transactions.md); start with an empty data directory, or delete the "
                    f"{t['name']}-* directories and its entry in topics.json to drop committed offsets "
                    "and transaction state")

    def _index(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    # ---- lookups --------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def partition(self, name: str, index: int) -> Partition | None:
        """The partition's log if this broker holds it."""
        t = self.by_name.get(name)
        return None if t is None else t.local.get(index)

    def exists(self, name: str, index: int) -> bool:
        """The partition exists in the cluster (held here or not)."""
        t = self.image.topics.get(name)
        return t is not None and 0 <= index < len(t.partitions)

    def internal_replication_factor(self, configured: int) -> int:
        """An internal topic's replicas: as configured (Kafka's default 3), at most the brokers of
        the cluster (its voters; one without `voters`, Kafka's single-node setting of 1). Refused
        with COORDINATOR_NOT_AVAILABLE while fewer are alive, as Kafka does: created with the
        brokers up at first use, the topic would keep fewer replicas for good."""
        rf = max(1, min(configured, len(self.cfg.voter_map()) or 1))
        live = len(self.image.live_brokers())
        if live < rf:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             f"an internal topic needs {rf} brokers alive, {live} are")
        return rf

    def missing(self, name: str, index: int) -> ErrorCode:
        """Why a partition has no log here: its log directory failed (KAFKA_STORAGE_ERROR),
        another broker's (NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and goes
        there) or nobody's."""
        if (name, index) in self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if self.exists(name, index) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # ---- changes (through the controller) -----------------------------------------------------
    def _writer(self) -> TopicWriter:
        if self.writer is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller to send topic changes to")
        return self.writer

    def check_create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> tuple[int, int]:
        """Validate a creation request; returns the effective (partitions, replication factor).
        Whether the replicas can be placed is the controller's to say."""
        validate_topic_name(name)
        if name in self.by_name:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        n = self.cfg.num_partitions if num_partitions == -1 else num_partitions
        rf = self.cfg.default_replication_factor if replication_factor == -1 else replication_factor
        if n <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {n}")
        if n > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{n} partitions is more than this broker allows")
        if rf <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Replication factor must be larger than 0, got {rf}.")
        self.check_configs(configs)
        return n, rf

    def check_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
        """Validate a complete set of topic overrides (names, types, ranges) as CreateTopics and
        both AlterConfigs APIs need it; returns the log settings they amount to."""
        for k, v in configs.items():
            if v is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"config {k!r} has no value")
            check_value(k, v)
        try:
            return self.log_config({k: v for k, v in configs.items() if v is not None})
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None,
                     assignments: Sequence[Sequence[int]] | None = None) -> Topic:
        """Create through the controller; returns once this broker's image has the topic."""
        configs = dict(configs or {})
        if assignments:
            n, rf = len(assignments), len(assignments[0])
            validate_topic_name(name)
            if name in self.by_name:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            self.check_configs(configs)
        else:
            n, rf = self.check_create(name, num_partitions, replication_factor, configs)
        await self._writer().create_topic(name, n, rf, configs, assignments)
        await self.wait_for(lambda: name in self.by_name, f"topic {name}")
        topic = self.by_name[name]  # before the wait below: it may be deleted meanwhile
        await self._disk_work_done(name)
        log.info("topic created", topic=name, partitions=n, replication_factor=rf)
        return topic

    async def ensure_internal(self, name: str, num_partitions: int, configured_rf: int,
                              configs: Mapping[str, str]) -> None:
        """Create an internal topic on its first need (as Kafka does when a group or transactional
        id first looks for its coordinator) and return once its logs here are open; without a
        controller, or too few brokers alive, the caller finds no topic and answers
        COORDINATOR_NOT_AVAILABLE. The creation is a task of its own, shared by every request
        that needs it meanwhile: a client that drops the request (librdkafka closes the bootstrap
        connection its first FindCoordinator went out on) must not cut the wait for the logs
        short, or the next request, finding the topic, would name a leader whose log is not open
        and the coordinator would answer COORDINATOR_LOAD_IN_PROGRESS, which some clients'
        commits do not retry."""
        task = self._internal.get(name)
        if task is None:
            if name in self.by_name or name in self.image.topics:
                return
            task = self._internal[name] = asyncio.get_running_loop().create_task(
                self._create_internal(name, num_partitions, configured_rf, configs))
            task.add_done_callback(lambda _: self._internal.pop(name, None))
        await asyncio.shield(task)

    async def _create_internal(self, name: str, num_partitions: int, configured_rf: int,
                               configs: Mapping[str, str]) -> None:
        try:
            await self.create(name, num_partitions, self.internal_replication_factor(configured_rf), configs)
        except KafkaError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:  # another broker's first need came first
                await self._disk_work_done(name)
            else:
                log.warning("cannot create " + name, error=e.code.name, message=e.message)

    async def _disk_work_done(self, name: str) -> None:
        """Give this broker's logs of `name` the time to open (or go) before answering, so that a
        client of this broker finds the change made here; it is committed either way (Kafka does
        not wait at all: a replica not open yet answers NOT_LEADER_OR_FOLLOWER, retriable)."""
        try:
            await self.wait_for(lambda: not self.busy(name), f"the logs of {name}")
        except KafkaError:
            log.warning("logs still being opened or removed when the change was answered", topic=name)

    def _existing(self, name: str) -> Topic:
        topic = self.by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return topic

    def check_add_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> Topic:
        """Validate raising a topic's partition count to `count`, with Kafka's errors and messages."""
        topic = self._existing(name)
        if topic.is_internal:
            # The group and transaction coordinators map keys to partitions by this count, fixed
            # at startup; records already written would be looked for in the wrong partition.
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"The number of partitions of the internal topic {name} cannot be changed.")
        current = topic.num_partitions
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if count > MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{count} partitions is more than this broker allows")
        if assignments is not None:
            added = count - current
            if len(assignments) != added:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {added} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
            registered = [b.node_id for b in self.image.brokers] or [self.cfg.node_id]
            for replicas in assignments:
                check_assignment(replicas, registered)
        return topic

    async def add_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None = None) -> Topic:
        topic = self.check_add_partitions(name, count, assignments)
        await self._writer().create_partitions(name, count, assignments)
        await self.wait_for(lambda: (t := self.by_name.get(name)) is not None and t.num_partitions >= count,
                            f"partitions of {name}")
        await self._disk_work_done(name)
        log.info("partitions added", topic=name, partitions=count)
        return topic

    def check_alter_configs(self, name: str, configs: Mapping[str, str | None]) -> Topic:
        topic = self._existing(name)
        self.check_configs(configs)
        return topic

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> Topic:
        """Replace a topic's overrides (what AlterConfigs means; IncrementalAlterConfigs computes the
        whole new set first). The partitions take the new settings when the image brings them."""
        topic = self._existing(name)
        self.check_configs(configs)
        new = dict(configs)
        if new == dict(topic.configs):
            return topic
        await self._writer().set_configs(name, new)
        await self.wait_for(lambda: (t := self.by_name.get(name)) is None or dict(t.configs) == new,
                            f"configs of {name}")
        log.info("topic configs altered", topic=name, configs=new)
        return topic

    async def set_broker_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of a BROKER resource ("" the cluster-wide default); every
        broker's partitions take them when the image brings them."""
        dynamic_configs.check(configs)
        new = dict(configs)
        if new == dict(self.image.broker_configs.get(resource_name, {})):
            return
        await self._writer().set_broker_configs(resource_name, new)
        await self.wait_for(lambda: dict(self.image.broker_configs.get(resource_name, {})) == new,
                            f"dynamic configs of broker resource {resource_name!r}")
        log.info("dynamic broker configs altered", resource=resource_name, configs=new)

    async def delete(self, name: str) -> Topic:
        topic = self.by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        await self._writer().delete_topic(name)
        await self.wait_for(lambda: self.by_name.get(name) is not topic, f"deleting {name}")
        await self._disk_work_done(name)
        return topic

    def close(self) -> None:
        self._closing = True
        for task in self._internal.values():
            task.cancel()
        for op in self._opens:
            op.stopped = True  # what has not begun opening is not opened
        for key in list(self.moves):
            self._stop_move(key)
        for t in self.by_name.values():
            for p in t.local.values():
                p.close()
        self.group_commit.close()
        for io in self._ios.values():
            io.close()  # an open under way ends first
        for op in self._opens:
            if op.part is not None and not op.part.closed:
                op.part.close()

