"""Quarter 4 of the rotation of light seeds (tests/helpers/dst/rotation.py): a file of its own so
that pytest-xdist runs the quarters on different workers."""

from __future__ import annotations

import pytest

from tests.helpers.dst.rotation import chunks, run_chunk


@pytest.mark.parametrize("first", chunks(4))
def test_the_rotation_of_seeds_finds_nothing(first: int) -> None:
    run_chunk(first)
