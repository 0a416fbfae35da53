"""The broker's log directories (Kafka's log.dirs): which holds which partition, where a new one
goes, which have failed.

Each directory carries a meta.properties as Kafka's does (cluster.id, node.id, a directory.id of
its own, version 1), so a directory moved to another broker or cluster is refused at start rather
than served. At start every directory is listed once, in a worker thread: `topic-N` is a
partition's replica, a `topic-N` holding FUTURE_MARKER is a copy AlterReplicaLogDirs was making
when the broker stopped (broker/partition/move.py: the move goes on from it once the replica
opens; two such copies of one partition are both removed), and `*-delete` is a replica a
finished move left to remove. A partition found in two directories without a marker is refused, as Kafka
refuses it: only an operator knows which copy is right.

Placement is Kafka's rule (LogManager.nextLogDirs): the online directory holding the fewest
partitions, current and future replicas both counted, the first listed on a tie — unless
AlterReplicaLogDirs named one for a replica not yet here.

A directory whose disk fails is marked offline here (`fail`); taking its partitions offline is
the topic table's (broker/topics.py). A directory that cannot be used at start is offline from
the start, unless it holds the metadata log: then the broker does not start, as Kafka does not.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from storage.checkpoint import atomic_write
from storage.fs import FileSystem, mkdir_durable

from .config import ConfigError
from .quorum.wire_codec import METADATA_TOPIC

log = structlog.get_logger(__name__)

META_PROPERTIES = "meta.properties"
FUTURE_MARKER = "future-replica"  # in a partition directory: a copy being made, not the replica
DELETE_SUFFIX = "-delete"  # `topic-N.<id>-delete`: a replica a move replaced, removed off the loop
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")

Key = tuple[str, int]


@dataclass(slots=True, eq=False)
class LogDir:
    path: Path  # absolute
    dir_id: uuid.UUID | None = None  # meta.properties' directory.id; None if it failed before it was read
    error: str | None = None  # why it is offline; None while it is online

    @property
    def online(self) -> bool:
        return self.error is None


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def read_properties(data: bytes) -> dict[str, str]:
    """A Java properties file as Kafka writes meta.properties (key=value lines, # comments)."""
    out: dict[str, str] = {}
    for line in data.decode("utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def least_loaded(loads: Sequence[tuple[int, bool]]) -> int | None:
    """Index of the online directory with the fewest partitions, the first listed on a tie:
    `loads` is (partitions, online) per directory in configured order. None if none is online."""
    best: int | None = None
    for i, (count, online) in enumerate(loads):
        if online and (best is None or count < loads[best][0]):
            best = i
    return best


def partition_key(name: str) -> Key | None:
    """("topic", N) for a partition directory's name `topic-N`."""
    m = _PARTITION_DIR.match(name)
    if m is None or m.group(1) == METADATA_TOPIC:
        return None
    return m.group(1), int(m.group(2))


class LogDirs:
    def __init__(self, paths: Sequence[str], metadata_dir: str, node_id: int, cluster_id: str,
                 fs: FileSystem, setting: str = "log_dirs") -> None:
        """`paths` and `metadata_dir` absolute (the caller resolves them); `setting` names them in errors."""
        self.fs = fs
        self.setting = setting
        self.dirs = [LogDir(Path(p)) for p in paths]
        self.metadata_dir = Path(metadata_dir)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.where: dict[Key, LogDir] = {}  # each replica held here: the directory it is in
        self.moving: dict[Key, LogDir] = {}  # replicas being copied (AlterReplicaLogDirs): their destination
        self.resume: dict[Key, LogDir] = {}  # moves a stop interrupted: started again once the replica opens
        self.preferred: dict[Key, LogDir] = {}  # AlterReplicaLogDirs for a replica not here yet
        self.unknown_offline = False  # a directory failed before it could be listed (see `holds_unknown`)

    # ---- start ------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Create and check every directory, write or check its meta.properties, find its
        partitions and resolve what an interrupted move left. Blocking: run it in a thread."""
        for d in self.dirs:
            try:
                mkdir_durable(self.fs, d.path)
                d.dir_id = self._meta_properties(d.path)
                self._scan(d)
            except OSError as e:
                if d.path == self.metadata_dir:
                    raise ConfigError(self.setting, str(d.path), f"the metadata log's directory cannot be used: "
                                                               f"{e.strerror or e}") from None
                d.error = f"cannot be used at start: {e.strerror or e}"
                self.unknown_offline = True
                log.error("log directory offline", log_dir=str(d.path), reason=d.error)
        if all(d.path != self.metadata_dir for d in self.dirs):
            mkdir_durable(self.fs, self.metadata_dir)
            self._meta_properties(self.metadata_dir)
        if not any(d.online for d in self.dirs):
            raise ConfigError(self.setting, ",".join(str(d.path) for d in self.dirs), "no log directory can be used")
        self._resolve_futures()

    def _meta_properties(self, path: Path) -> uuid.UUID:
        file = path / META_PROPERTIES
        try:
            props = read_properties(self.fs.read(file))
        except FileNotFoundError:
            props = {}
        except (UnicodeDecodeError, ValueError):
            raise ConfigError(self.setting, str(path), f"{META_PROPERTIES} is not readable") from None
        for key, mine in (("cluster.id", self.cluster_id), ("node.id", str(self.node_id))):
            if key in props and props[key] != mine:
                raise ConfigError(self.setting, str(path), f"{META_PROPERTIES} says {key}={props[key]}, this broker "
                                                         f"has {mine}: the directory belongs to another broker")
        try:
            dir_id = parse_kafka_uuid(props["directory.id"])
        except (KeyError, ValueError):
            dir_id = uuid.uuid4()
        if props.get("directory.id") != kafka_uuid(dir_id) or len(props) < 4:
            text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={self.node_id}\n"
                    f"directory.id={kafka_uuid(dir_id)}\nversion=1\ncluster.id={self.cluster_id}\n")
            atomic_write(self.fs, file, text.encode())
        return dir_id

    def _scan(self, d: LogDir) -> None:
        for name in sorted(self.fs.listdir(d.path)):
            if name.endswith(DELETE_SUFFIX):
                self.fs.remove_tree(d.path / name)
                continue
            key = partition_key(name)
            if key is None:
                continue
            if self.fs.exists(d.path / name / FUTURE_MARKER):
                other = self.resume.pop(key, None)
                if other is None:
                    self.resume[key] = d
                else:  # a move redirected as the broker stopped: which one was wanted last is not known
                    for x in (other, d):
                        self.fs.remove_tree(x.path / name)
                    log.warning("two unfinished copies of a replica removed: the move is to be asked again",
                                partition=name, log_dirs=[str(other.path), str(d.path)])
                continue
            other = self.where.get(key)
            if other is not None:
                raise ConfigError(self.setting, str(d.path), f"partition {name} is in {other.path} and in {d.path}; "
                                                           "delete the copy that is not the replica")
            self.where[key] = d

    def _resolve_futures(self) -> None:
        """A future replica whose partition has no replica left was being swapped in when the
        broker stopped (the old directory already retired): it is the replica. Any other is an
        unfinished copy: the move goes on from it once the partition opens (ReplicaMove's
        `resume`). With a directory unreadable, a lone future is left as it is: the replica it
        would replace may be there, or retired there (the partition stays offline meanwhile:
        `holds_unknown`)."""
        for key, d in list(self.resume.items()):
            directory = d.path / f"{key[0]}-{key[1]}"
            if key not in self.where and self.unknown_offline:
                del self.resume[key]
                log.warning("a moved replica's copy left as it is while a log directory is offline",
                            partition=directory.name, log_dir=str(d.path))
            elif key not in self.where:
                self.fs.unlink(directory / FUTURE_MARKER)
                self.fs.fsync_dir(directory)
                self.where[key] = d
                del self.resume[key]
                log.info("a moved replica's swap finished at start", partition=directory.name, log_dir=str(d.path))

    # ---- placement --------------------------------------------------------------------------------
    def locate(self, key: Key) -> LogDir | None:
        return self.where.get(key)

    def holds_unknown(self, key: Key) -> bool:
        """The replica may be in a directory that failed before it could be listed: it must not
        be created again elsewhere (a leader with an empty log would lose what the failed disk held)."""
        return self.unknown_offline and key not in self.where

    def loads(self) -> list[tuple[int, bool]]:
        counts = {id(d): 0 for d in self.dirs}
        for d in (*self.where.values(), *self.moving.values()):
            counts[id(d)] += 1
        return [(counts[id(d)], d.online) for d in self.dirs]

    def place(self, key: Key) -> LogDir:
        """The directory a new replica goes to (and is recorded in)."""
        d = self.preferred.pop(key, None)
        if d is None and len(self.dirs) == 1 and self.dirs[0].online:
            d = self.dirs[0]  # nothing to weigh (counting the load is a pass over every replica)
        if d is None or not d.online:
            i = least_loaded(self.loads())
            if i is None:
                raise OSError(f"no log directory is online for {key[0]}-{key[1]}")
            d = self.dirs[i]
        self.where[key] = d
        return d

    def prefer(self, key: Key, d: LogDir) -> None:
        self.preferred[key] = d

    def forget(self, key: Key) -> None:
        self.where.pop(key, None)
        self.moving.pop(key, None)
        self.resume.pop(key, None)

    def by_path(self, path: str) -> LogDir | None:
        """The configured directory `path` names (absolute, as DescribeLogDirs reports it)."""
        return next((d for d in self.dirs if d.path == Path(path)), None)

    # ---- failure -----------------------------------------------------------------------------------
    def fail(self, d: LogDir, reason: str) -> list[Key]:
        """Mark `d` offline; the replicas it held (current and future), for the caller to take offline."""
        if d.online:
            d.error = reason
            log.error("log directory failed: its partitions are offline", log_dir=str(d.path), reason=reason)
        return [k for k, v in (*self.where.items(), *self.moving.items()) if v is d]

    @property
    def offline_ids(self) -> list[uuid.UUID]:
        return [d.dir_id for d in self.dirs if not d.online and d.dir_id is not None]

    @property
    def online_ids(self) -> list[uuid.UUID]:
        return [d.dir_id for d in self.dirs if d.online and d.dir_id is not None]
