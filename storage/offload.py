"""How a log's slow writes leave its owner's thread, and how they stay in order with the rest.

The broker drives every PartitionLog from its event loop, where a write that waits for a busy
disk stalls every connection (the chaos campaigns saw brokers stalled for seconds inside fsync).
So the writes nobody has to wait for — the recovery-point, log-start, high-watermark and
leader-epoch checkpoints, producer-state snapshots, a sealed segment's index entries, and the
flush policy's fsyncs — are taken on the owner's thread (what to write, as bytes) and done on an
I/O thread. Appends (into the page cache), reads, truncation and segment creation stay on the
owner's thread: their results are needed at once (docs/storage.md "What runs off the loop").

Those files are also written on the owner's thread, durably: by a truncation (it must lower the
recovery point before any offset is rewritten), by DeleteRecords, by a compaction swap and at
open and close. An older write running late must never replace what such a write put there (a
truncation's recovery point overwritten by the one checkpointed before it would vouch for
offsets that were rewritten). Two ways to order them: one I/O queue per log through which the
owner's writes go too — then a truncation would have to wait for the queue, and the replica
fetcher and leader election, which truncate, would become asynchronous — or one lock per log
that both take, with a generation the owner bumps under it whenever it changes those files: an
off-thread write taken in an older generation is dropped. `WriteGuard` is the second. The owner
waits for the lock only while an off-thread write of that same log is running (a few small
writes and fsyncs), and only in those rare operations; never on the append or read path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class Offload(Protocol):
    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        """Run `work` on an I/O thread, in submission order; once it returned, run `then` back
        on the submitter's thread (not if `work` raised: the runner reports the error)."""
        ...


class Inline:
    """No I/O thread (tools, tests, a log opened in a worker thread): write right away."""

    __slots__ = ()

    def submit(self, work: Callable[[], None], then: Callable[[], None]) -> None:
        work()
        then()


INLINE: Offload = Inline()


class WriteGuard:
    """One log's lock and generation (see the module docstring)."""

    __slots__ = ("lock", "generation")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.generation = 0

    @contextmanager
    def changing(self) -> Iterator[None]:
        """The owner is about to change the log's files itself: writes taken before are stale."""
        with self.lock:
            self.generation += 1
            yield

    @contextmanager
    def current(self, generation: int) -> Iterator[bool]:
        """Held while an off-thread write runs; yields whether it is still current."""
        with self.lock:
            yield generation == self.generation
