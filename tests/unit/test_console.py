"""Pieces of `ketch produce` / `ketch consume` that need no broker: the progress line, header and
format parsing (the round trips themselves: tests/integration/test_console_tools.py)."""

from __future__ import annotations

import json

import pytest

from client import console
from client.structs import ConsumerRecord
from protocol.clock import ManualClock


def test_progress_line_appears_every_few_seconds_on_long_input(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    clock = ManualClock(100_000)
    p = console._Progress("t", clock)
    p.tick(10, 5)
    assert capsys.readouterr().err == ""  # a short input prints no progress
    clock.advance(int(console.PROGRESS_EVERY_S * 1000))
    p.tick(5000, 4000)
    assert capsys.readouterr().err == "t: 5000 lines sent, 4000 acknowledged (2,000/s)\n"
    clock.advance(500)
    p.tick(6000, 5000)
    assert capsys.readouterr().err == ""
    p.done(6000)
    assert capsys.readouterr().err == "t: 6000 lines acknowledged (2.5s)\n"


def test_headers_must_be_key_equals_value() -> None:
    assert console._headers(["a=1", "b=x=y", "c="]) == (("a", b"1"), ("b", b"x=y"), ("c", b""))
    for bad in ("novalue", "=v"):
        with pytest.raises(console.ConsoleError, match="KEY=VALUE"):
            console._headers([bad])


REC = ConsumerRecord("t", 2, 17, 1700, b"k", None, (("h", b"v"), ("n", None)))


def test_format_placeholders_and_json() -> None:
    fmt = console._formatter("{topic}/{partition}@{offset} {timestamp} {key}={value}\\t[{headers}]", False)
    assert fmt(REC) == "t/2@17 1700 k=null\t[h=v,n=null]"
    assert json.loads(console._formatter(None, True)(REC)) == {
        "topic": "t", "partition": 2, "offset": 17, "timestamp": 1700, "key": "k", "value": None,
        "headers": [["h", "v"], ["n", None]]}
    assert console._formatter(None, False)(REC._replace(value=b"\xff ok")) == "\\xff ok"


def test_an_unknown_placeholder_is_refused_before_consuming() -> None:
    with pytest.raises(console.ConsoleError, match="placeholders"):
        console._formatter("{nope}", False)
