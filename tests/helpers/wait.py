"""Condition waiting with a deadline: the only sanctioned way for a test to wait for something."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """Raised when a condition did not become true before its deadline.

    It is an AssertionError so pytest reports it as a test failure, not an error in the harness.
    """


def wait_until(
    cond: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Call ``cond`` until it returns a truthy value; return that value.

    Raises :class:`WaitTimeout` after ``timeout`` seconds. ``cond`` is always called at least once and
    one final time at the deadline, so a slow machine never loses a race against the last interval.
    Exceptions raised by ``cond`` propagate: a condition that can legitimately fail while it waits must
    catch them itself (see :func:`wait_until_no_error`).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            text = message() if callable(message) else message
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {text}")
        time.sleep(min(interval, remaining))


def wait_until_no_error(
    fn: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.1,
    exceptions: tuple[type[BaseException], ...] = (Exception,),
    message: str = "call to succeed",
) -> T:
    """Call ``fn`` until it returns without raising one of ``exceptions``; return its result."""
    last: list[BaseException] = []

    def attempt() -> tuple[T] | None:
        try:
            return (fn(),)
        except exceptions as exc:  # noqa: B030 - the tuple is provided by the caller
            last[:] = [exc]
            return None

    result = wait_until(
        attempt,
        timeout=timeout,
        interval=interval,
        message=lambda: f"{message} (last error: {last[0]!r})" if last else message,
    )
    return result[0]


async def wait_until_async(cond: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
                           message: str = "condition") -> T:
    """:func:`wait_until` for a test that runs on the event loop beside an in-process broker:
    the loop keeps turning between checks."""
    import asyncio  # noqa: PLC0415 - only the in-process tests need it

    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {message}")
        await asyncio.sleep(min(interval, remaining))
