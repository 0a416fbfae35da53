"""The quorum's durable store: what a Ready persisted is what a restart loads — after any mix of
appends, truncations, votes and snapshots, after a torn tail, and after SIGKILL mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.quorum_sim import _apply_to_disk
from helpers.recording_fs import RecordingFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.quorum.messages import Entry, Snapshot
from broker.quorum.node import Persisted, Ready
from broker.quorum.store import LOG_FILE, QuorumStore

ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.binary(max_size=20)),
    st.tuples(st.just("truncate"), st.integers(0, 30)),
    st.tuples(st.just("vote"), st.integers(0, 5), st.none() | st.integers(1, 3)),
    st.tuples(st.just("snapshot"), st.integers(0, 30)),
), max_size=25)


def _ready(**kw: object) -> Ready:
    base: dict[str, object] = dict(hard_state=None, truncate_to=None, entries=(), snapshot=None, messages=(),
                                   restore=None, committed=())
    base.update(kw)
    return Ready(**base)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(ops)
def test_a_restart_loads_exactly_what_was_persisted(tmp_path_factory, script) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("quorum")
    store = QuorumStore(d)
    model = store.load()
    epoch = 1
    for op in script:
        start = model.snapshot.end_offset if model.snapshot else 0
        end = start + len(model.entries)
        if op[0] == "append":
            entries = tuple(Entry(end + i, epoch, op[2] + bytes([i])) for i in range(op[1]))
            r = _ready(entries=entries)
        elif op[0] == "truncate":
            target = max(start, min(op[1], end))
            r = _ready(truncate_to=target)
        elif op[0] == "vote":
            epoch = max(epoch, op[1])
            r = _ready(hard_state=(epoch, op[2]))
        else:
            if not model.entries:
                continue
            cut = max(start + 1, min(op[1], end))
            r = _ready(snapshot=Snapshot(cut, model.entries[cut - start - 1].epoch, b"state@%d" % cut))
        store.persist(r)
        model = _apply_to_disk(model, r)
        assert QuorumStore(d).load() == model


def test_a_torn_or_damaged_tail_is_cut_off(tmp_path: Path) -> None:
    store = QuorumStore(tmp_path)
    store.load()
    store.persist(_ready(hard_state=(3, 2), entries=tuple(Entry(i, 3, b"e%d" % i) for i in range(5))))
    log = tmp_path / LOG_FILE
    whole = log.read_bytes()
    log.write_bytes(whole + whole[:7])  # half a frame: a crash in the middle of a write
    loaded = QuorumStore(tmp_path).load()
    assert [e.offset for e in loaded.entries] == [0, 1, 2, 3, 4] and (loaded.epoch, loaded.voted_for) == (3, 2)
    assert log.read_bytes() == whole  # the torn bytes are gone, so later appends follow the last good frame
    damaged = bytearray(whole)
    damaged[len(whole) // 2] ^= 0xFF
    log.write_bytes(bytes(damaged))
    kept = QuorumStore(tmp_path).load().entries
    assert 0 < len(kept) < 5 and all(e == Entry(e.offset, 3, b"e%d" % e.offset) for e in kept)


WRITER = textwrap.dedent("""
    import sys
    from broker.quorum.messages import Entry
    from broker.quorum.node import Ready
    from broker.quorum.store import QuorumStore
    store = QuorumStore(sys.argv[1])
    p = store.load()
    end = len(p.entries)
    while True:
        entries = tuple(Entry(end + i, 1, b"x" * 300) for i in range(20))
        store.persist(Ready((1, 1), None, entries, None, (), None, ()))
        end += 20
        print(end, flush=True)  # acknowledged: everything below `end` is on disk
""")


def test_sigkill_mid_write_loses_nothing_acknowledged(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    acked = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked = int(line)
            if acked >= 2000:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    loaded = QuorumStore(tmp_path).load()
    assert acked >= 2000 and len(loaded.entries) >= acked
    assert [e.offset for e in loaded.entries] == list(range(len(loaded.entries)))
    assert loaded == Persisted(1, 1, None, loaded.entries)


def test_the_new_log_files_directory_entry_is_made_durable(tmp_path: Path) -> None:
    """Issue 11 item 2's lesson, kept for the quorum: a file that is fsynced but whose directory
    entry is not can vanish in a power loss; the log file is created and its directory fsynced
    before anything is appended (votes and snapshots go through the atomic, durable write)."""
    fs = RecordingFileSystem()
    QuorumStore(tmp_path / "q", fs).load()
    created = fs.calls.index(("create", tmp_path / "q" / LOG_FILE))
    assert [p for op, p in fs.calls[created:] if op == "fsync_dir"] == [tmp_path / "q"]
    assert (tmp_path / "q" / LOG_FILE).exists()
    fs.calls.clear()
    QuorumStore(tmp_path / "q", fs).load()
    assert "fsync_dir" not in [op for op, _ in fs.calls]  # an existing file needs nothing more
