"""Issue 24: the metadata quorum persists its Readies on an I/O thread, not on the event loop.

While a Ready's fsync is held up (a fault hook in the file system blocks it, as a busy disk
would) the loop keeps turning — the shell keeps ticking its node — and none of that Ready's
messages leaves until the write returned. A write that fails sends nothing and stops the node.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from helpers.recording_fs import RecordingFileSystem
from helpers.wait import wait_until_async

from broker.quorum.messages import Entry, VoteRequest, VoteResponse
from broker.quorum.shell import QuorumShell
from broker.quorum.store import STATE_FILE

# Nobody listens on the other voters' ports: what the node sends them is refused and dropped.
VOTERS = {1: ("127.0.0.1", 9), 2: ("127.0.0.1", 9), 3: ("127.0.0.1", 9)}
VOTE = VoteRequest(epoch=1, candidate=2, last_offset=-1, last_epoch=-1, pre_vote=False)


class HeldSync:
    """Blocks the fsync of the quorum-state file until released (or fails it)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, op: str, path: Path) -> None:
        if op == "sync" and path.name.startswith(STATE_FILE):
            self.entered.set()
            if self.fail:
                raise OSError(5, "test: the disk failed the fsync")
            if not self.release.wait(10):
                raise OSError(5, "test: never released")


async def test_the_loop_turns_while_a_persist_is_held_and_its_reply_waits_for_it(tmp_path: Path) -> None:
    hold = HeldSync()
    fs = RecordingFileSystem(fault=hold)
    shell = QuorumShell(1, VOTERS, tmp_path / "meta", "cluster", fs=fs)
    await shell.start()
    assert shell.node is not None
    try:
        done_at: list[list[tuple[str, Path]]] = []  # the file operations done when the reply left
        ask = asyncio.ensure_future(shell.ask(2, VOTE, VoteResponse))
        ask.add_done_callback(lambda _: done_at.append(list(fs.calls)))
        await wait_until_async(hold.entered.is_set, message="the vote's fsync to start")
        ticks = shell.node.now
        # The fsync is held on the I/O thread: the loop runs on and the shell keeps ticking.
        await wait_until_async(lambda: shell.node is not None and shell.node.now >= ticks + 3,
                               message="the shell to tick while the fsync is held")
        assert not ask.done()  # the vote's answer waits for the vote to be durable
        hold.release.set()
        reply = await asyncio.wait_for(ask, 10)
        assert isinstance(reply, VoteResponse) and reply.granted
        state = tmp_path / "meta" / STATE_FILE
        [calls] = done_at
        renamed = calls.index(("renamed-to", state))
        assert ("fsync_dir", tmp_path / "meta") in calls[renamed:]  # the whole atomic write returned first
    finally:
        hold.release.set()
        await shell.stop()
    reloaded = QuorumShell(1, VOTERS, tmp_path / "meta", "cluster").store.load()
    assert (reloaded.epoch, reloaded.voted_for) == (1, 2)


async def test_a_failed_persist_sends_nothing_and_stops_the_node(tmp_path: Path) -> None:
    hold = HeldSync(fail=True)
    shell = QuorumShell(1, VOTERS, tmp_path / "meta", "cluster", fs=RecordingFileSystem(fault=hold))
    await shell.start()
    try:
        assert await asyncio.wait_for(shell.ask(2, VOTE, VoteResponse), 10) is None
        assert isinstance(shell.failed, OSError)
        assert await shell.ask(3, VoteRequest(2, 3, -1, -1, pre_vote=False), VoteResponse) is None
    finally:
        await shell.stop()


async def test_a_node_alone_leads_and_has_applied_its_log_once_started(tmp_path: Path) -> None:
    applied: list[bytes] = []
    shell = QuorumShell(1, {1: ("127.0.0.1", 9)}, tmp_path / "meta", "cluster",
                        on_commit=lambda e: applied.append(e.data))
    await shell.start()
    assert shell.serving
    assert await shell.propose(b"a") and await shell.propose(b"b")
    await shell.stop()

    again: list[Entry] = []
    restarted = QuorumShell(1, {1: ("127.0.0.1", 9)}, tmp_path / "meta", "cluster", on_commit=again.append)
    await restarted.start()
    try:
        assert restarted.serving and [e.data for e in again] == [b"a", b"b"] == applied
    finally:
        await restarted.stop()
