"""broker/resolver.py: one lookup in flight per name, shared; a caller that gives up leaves no
unretrieved exception behind; IP literals need no lookup."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest
from helpers.wait import wait_until_async

from broker import resolver


class GatedDns:
    """getaddrinfo that answers once `gate` is open (failing for names in `dead`), so a test decides
    when a lookup finishes instead of racing a delay against its own callers' timeouts."""

    def __init__(self, dead: set[str]) -> None:
        self.dead, self.calls, self.finished = dead, 0, 0
        self.gate = asyncio.Event()

    async def __call__(self, host: str, port: int, **_: Any) -> list[Any]:
        self.calls += 1
        try:
            await self.gate.wait()
            if host in self.dead:
                raise socket.gaierror(-3, "Temporary failure in name resolution")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
                    (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]
        finally:
            self.finished += 1


async def test_concurrent_lookups_of_one_name_share_one_and_literals_need_none(monkeypatch: pytest.MonkeyPatch) -> None:
    dns = GatedDns(set())
    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", dns)
    callers = asyncio.gather(*(resolver.resolve("ketch-2", 9094) for _ in range(8)))
    await wait_until_async(lambda: dns.calls, message="the lookup to start")
    dns.gate.set()
    assert await callers == [["10.0.0.7"]] * 8 and dns.calls == 1
    assert await resolver.resolve("127.0.0.1", 9094) == ["127.0.0.1"]
    assert await resolver.resolve("::1", 9094) == ["::1"]
    assert dns.calls == 1
    await resolver.resolve("ketch-2", 9094)  # answers are not cached: a restarted container may move
    assert dns.calls == 2


async def test_a_caller_that_gives_up_leaves_the_lookup_to_finish_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    dns = GatedDns({"gone"})
    monkeypatch.setattr(loop, "getaddrinfo", dns)
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(resolver.resolve("gone", 9094), 0.05)
        assert dns.calls == 1  # the three callers waited on the same lookup
        dns.gate.set()  # it fails with nobody waiting
        await wait_until_async(lambda: dns.finished and "gone" not in resolver._inflight.get(loop, {}),
                               message="the abandoned lookup to fail and be settled")
        gc.collect()
        await asyncio.sleep(0)
        assert reported == []  # no "exception was never retrieved"
        with pytest.raises(socket.gaierror):
            await resolver.resolve("gone", 9094)  # a caller that waits gets the failure
        assert dns.calls == 2
    finally:
        loop.set_exception_handler(None)
