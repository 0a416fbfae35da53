"""Producer-id blocks: the block's end is durable before an id from it is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker import producer_ids
from broker.producer_ids import BLOCK_SIZE, ProducerIdAllocator


def test_a_restarted_allocator_never_reissues_an_id(tmp_path: Path) -> None:
    a = ProducerIdAllocator(tmp_path)
    a.load()
    first = [a.allocate() for _ in range(3)]
    assert first == [0, 1, 2]
    b = ProducerIdAllocator(tmp_path)  # a crash: the rest of the first block is lost, never reused
    b.load()
    assert b.allocate() == BLOCK_SIZE


def test_the_block_goes_through_the_durable_atomic_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, bool]] = []
    real = producer_ids.atomic_write

    def spy(path: Path, data: bytes, *, durable: bool = True) -> None:
        calls.append((path, durable))
        real(path, data, durable=durable)

    monkeypatch.setattr(producer_ids, "atomic_write", spy)
    a = ProducerIdAllocator(tmp_path)
    a.load()
    for _ in range(BLOCK_SIZE + 1):
        a.allocate()
    assert calls == [(tmp_path / "producer_ids.json", True)] * 2
