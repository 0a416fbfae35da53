"""Test-only faults a build can be told to commit: break switches and crash points. Never set
either in production.

* `KETCH_TEST_BREAK=<name>[,<name>...]` breaks guarantees on purpose (GUARANTEES says what breaking
  each does), so the chaos suite proves its checker notices.
* `KETCH_TEST_CRASH_AT=<point>` makes the broker SIGKILL itself the first time a *commit* (or a
  move to another log directory) reaches that point (POINTS says where each is), so a test can stop
  it exactly between two durable steps and check that recovery finishes the transaction, or keeps
  the replica whole. SIGKILL, not an
  exception or a clean exit, because that is the failure simulated: no `finally`, flush or
  shutdown hook runs.
* `KETCH_TEST_DYING_DIR=<directory>` puts the broker's files on a `FaultyFileSystem` whose disk
  under that directory dies (every operation there fails with EIO, as a dead disk's do) once the
  process gets SIGUSR2: a test of broker processes fails one log directory when it chooses.
* `KETCH_TEST_SLOW_MKDIR_MS=<ms>` makes every directory the broker creates take that much longer,
  as on a slow or busy disk: a partition log opened for the first time creates its directory, so
  a test of broker processes can see what must wait for new logs to open (on a quiet machine they
  open in well under a millisecond, on a loaded CI runner not).

One module for both, in storage/, the lowest layer holding a guarantee to break: the log and the
producer state read the switches without importing the broker. Both variables are read once at
import; an unknown name stops the process (a typo must not run a test that tests nothing). A broker
started with either set says so (`announce`), so a log read later shows the build was broken on
purpose. Unset, each check costs one comparison.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from .fs import Data, File, FileStat, FileSystem

log = structlog.get_logger(__name__)

BREAK_ENV = "KETCH_TEST_BREAK"
GUARANTEES = {
    "lso": "read_committed fetches are served like read_uncommitted: past the last stable offset, with no "
           "aborted-transaction list (readers see aborted and not-yet-committed data)",
    "markers": "WriteTxnMarkers answers success for partition 0 of every non-internal topic without writing "
               "the marker (that partition's transactions hang, its LSO stops)",
    "acks": "acks=all is answered as soon as the leader has appended, before the in-sync replicas have the "
            "batch (a leader that dies or is cut off loses acknowledged writes)",
    "dedup": "a leader skips the producer-state sequence check: a retried batch is stored again instead of "
             "being answered with its first offsets (duplicates under one producer epoch)",
    "truncate": "a leader never tells a follower that its log diverges, so the follower skips truncation and "
                "keeps records the leader does not have (replicas differ at one offset)",
    "fence": "a partition leader accepts a batch whose producer epoch is older than the newest it knows of: "
             "it ignores the coordinator's PRODUCER_FENCED verdict on a transactional batch (KIP-890 verification) "
             "and its own producer state's epoch check (a fenced zombie's writes are stored)",
    "hw": "the high watermark counts every follower as having the leader's whole log before it fetched it "
          "(records are committed, served and acknowledged that only the leader has)",
    # The cluster-correctness scenarios (issue 23), each its fix taken back, for the simulator
    # to find (docs/simulation.md records the seed that finds each).
    "registration-serial": "a broker's registration is decided on the committed image and proposed beside the "
                           "controller's one-decision-at-a-time path, and the image applies a partition change "
                           "that does not follow from the partition (a fence and a registration decided on one "
                           "image combine into a leader outside its ISR) (issue 23 item 1)",
    "sole-isr-epoch": "every re-registration counts as after a clean shutdown: a partition only the restarted "
                      "broker can lead keeps it as leader at its old leader epoch, its torn log and all "
                      "(issue 23 item 2)",
    "kip903": "the controller takes AlterPartition's ISR members without their broker epochs: a delayed request "
              "adds a replica that crashed and registered again since, missing what it lost (issue 23 item 3)",
    "load-to-end": "a new coordinator waits at most 10 s for its high watermark to reach its log end at election, "
                   "then loads up to the high watermark (a PrepareCommit or offset commit past it is missed) "
                   "(issue 23 item 7)",
    "group-load-epoch": "a group load goes on after a newer election of its partition started another, reading "
                        "into and finishing the new one (issue 23 item 8)",
    "reaper-recheck": "the transaction reaper decides every timed-out id first and writes the decisions after, "
                      "each applied without checking it still matches the id's state and coordinator epoch "
                      "(issue 23 item 9)",
}
BROKEN = frozenset(n.strip() for n in os.environ.get(BREAK_ENV, "").split(",") if n.strip())
if BROKEN - GUARANTEES.keys():
    raise SystemExit(f"{BREAK_ENV}: unknown guarantee(s) {sorted(BROKEN - GUARANTEES.keys())}; "
                     f"known: {sorted(GUARANTEES)}")

CRASH_ENV = "KETCH_TEST_CRASH_AT"
POINTS = {
    "after_prepare": "PrepareCommit is in __transaction_state, no marker has been sent",
    "after_some_markers": "a partition leader wrote the first marker of a WriteTxnMarkers request carrying "
                          "more than one partition, and not the others",
    "markers_half_sent": "the coordinator heard from one partition leader that its commit markers are written "
                         "while other partitions' are still owed",
    "before_complete": "every marker is written, CompleteCommit is not",
    "move_copying": "a replica moving to another log directory: the future log took its first batches",
    "move_swapping": "a replica moving to another log directory: the current directory is retired, the "
                     "future one is still marked future",
}
CRASH_AT = os.environ.get(CRASH_ENV) or None
if CRASH_AT is not None and CRASH_AT not in POINTS:
    raise SystemExit(f"{CRASH_ENV}: unknown crash point {CRASH_AT!r}; known: {sorted(POINTS)}")


DYING_DIR_ENV = "KETCH_TEST_DYING_DIR"
DYING_DIR = os.environ.get(DYING_DIR_ENV) or None
DYING_SIGNAL = signal.SIGUSR2
SLOW_MKDIR_ENV = "KETCH_TEST_SLOW_MKDIR_MS"
SLOW_MKDIR_MS = int(os.environ.get(SLOW_MKDIR_ENV) or 0)


def broken(name: str) -> bool:
    """Whether this process was told to break `name` (unset: always False)."""
    return name in BROKEN


def crash_point(point: str) -> None:
    """SIGKILL this process if the test hook selects `point`."""
    if point != CRASH_AT:
        return
    sys.stderr.write(f"{CRASH_ENV}={point}: killing the broker now\n")
    sys.stderr.flush()
    signal.raise_signal(signal.SIGKILL)


def announce() -> None:
    """Log, at broker start, every guarantee this process was told to break and its crash point."""
    for name in sorted(BROKEN):
        log.warning("test build: a guarantee is broken on purpose", env=BREAK_ENV, broken=name,
                    what=GUARANTEES[name])
    if CRASH_AT:
        log.warning("test build: the broker kills itself at a transaction step", env=CRASH_ENV,
                    point=CRASH_AT, what=POINTS[CRASH_AT])
    if DYING_DIR:
        log.warning("test build: a log directory's disk dies on SIGUSR2", env=DYING_DIR_ENV, log_dir=DYING_DIR)
    if SLOW_MKDIR_MS:
        log.warning("test build: every directory made takes longer", env=SLOW_MKDIR_ENV, ms=SLOW_MKDIR_MS)


# Called with (operation, path) before the operation runs; raising fails that operation.
Fault = Callable[[str, Path], None]


class DyingDisk:
    """A fault: every operation under `root` fails with EIO once `die()` was called."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dead = False

    def die(self) -> None:
        if not self.dead:
            log.warning("test build: the disk under a log directory died", log_dir=str(self.root))
        self.dead = True

    def __call__(self, op: str, path: Path) -> None:
        if self.dead and (path == self.root or self.root in path.parents):
            raise OSError(errno.EIO, "Input/output error", str(path))


def _slow_mkdir(op: str, path: Path) -> None:
    if op == "mkdir":
        time.sleep(SLOW_MKDIR_MS / 1000)


def file_system(inner: FileSystem) -> tuple[FileSystem, DyingDisk | None]:
    """The file system a broker runs on: `inner`, unless KETCH_TEST_DYING_DIR or
    KETCH_TEST_SLOW_MKDIR_MS is set."""
    disk = DyingDisk(Path(DYING_DIR).absolute()) if DYING_DIR is not None else None
    hooks: list[Fault] = [h for h in (disk, _slow_mkdir if SLOW_MKDIR_MS else None) if h is not None]
    if not hooks:
        return inner, None

    def hook(op: str, path: Path) -> None:
        for h in hooks:
            h(op, path)

    return FaultyFileSystem(inner, hook), disk


class FaultyFileSystem:
    """Delegates to `inner`, calling `hook(operation, path)` before every operation (a test
    records them, or raises to fail one)."""

    def __init__(self, inner: FileSystem, hook: Fault) -> None:
        self.fs = inner
        self.hook = hook

    def open(self, path: Path, *, create: bool = False, truncate: bool = False,
             read_only: bool = False) -> File:
        self.hook("create" if create else "open", path)
        return FaultyFile(self.hook, path, self.fs.open(path, create=create, truncate=truncate,
                                                            read_only=read_only))

    def read(self, path: Path) -> bytes:
        self.hook("read", path)
        return self.fs.read(path)

    def stat(self, path: Path) -> FileStat:
        self.hook("stat", path)
        return self.fs.stat(path)

    def exists(self, path: Path) -> bool:
        self.hook("exists", path)
        return self.fs.exists(path)

    def listdir(self, path: Path) -> list[str]:
        self.hook("listdir", path)
        return self.fs.listdir(path)

    def rename(self, src: Path, dst: Path) -> None:
        self.hook("rename", src)
        self.hook("renamed-to", dst)
        self.fs.rename(src, dst)

    def unlink(self, path: Path) -> None:
        self.hook("unlink", path)
        self.fs.unlink(path)

    def mkdir(self, path: Path) -> None:
        self.hook("mkdir", path)
        self.fs.mkdir(path)

    def remove_tree(self, path: Path) -> None:
        self.hook("remove_tree", path)
        self.fs.remove_tree(path)

    def fsync_dir(self, path: Path) -> None:
        self.hook("fsync_dir", path)
        self.fs.fsync_dir(path)


class FaultyFile:
    def __init__(self, hook: Fault, path: Path, inner: File) -> None:
        self.hook = hook
        self.path = path
        self.inner = inner

    def pwrite(self, data: Data, pos: int) -> None:
        self.hook("pwrite", self.path)
        self.inner.pwrite(data, pos)

    def pwritev(self, parts: Sequence[Data], pos: int) -> int:
        self.hook("pwritev", self.path)
        return self.inner.pwritev(parts, pos)

    def pread(self, size: int, pos: int) -> bytes:
        self.hook("pread", self.path)
        return self.inner.pread(size, pos)

    def size(self) -> int:
        self.hook("size", self.path)
        return self.inner.size()

    def truncate(self, size: int) -> None:
        self.hook("truncate", self.path)
        self.inner.truncate(size)

    def sync(self) -> None:
        self.hook("sync", self.path)
        self.inner.sync()

    def datasync(self) -> None:
        self.hook("datasync", self.path)
        self.inner.datasync()

    def dup(self) -> File:
        self.hook("dup", self.path)
        return FaultyFile(self.hook, self.path, self.inner.dup())

    def close(self) -> None:
        self.hook("close", self.path)
        self.inner.close()
