"""The simulation's invariants on their own, fed the states they must reject and accept
(tests/helpers/dst/invariants.py; the runs themselves are in tests/sim/)."""

from __future__ import annotations

from pathlib import Path

from protocol.records import build_control_batch
from storage.fs import OS_FS
from tests.helpers.dst.invariants import Invariants


def test_producer_id_blocks_of_two_brokers_must_not_overlap() -> None:
    inv = Invariants()
    inv.check_pid_block(1.0, 1, 1, 0, 1000)
    inv.check_pid_block(1.0, 2, 1, 1000, 2000)
    inv.check_pid_block(2.0, 1, 1, 500, 1000)  # node 1 handed out half its block: the same block
    assert inv.violations == []
    inv.check_pid_block(3.0, 3, 1, 1500, 2500)
    assert len(inv.violations) == 1 and "node 3" in inv.violations[0] and "node 2" in inv.violations[0]


def test_a_restarted_broker_gets_a_block_of_its_own() -> None:
    inv = Invariants()
    inv.check_pid_block(1.0, 1, 1, 10, 1000)
    inv.check_pid_block(5.0, 1, 2, 0, 1000)  # the new incarnation was given the old one's block again
    assert len(inv.violations) == 1 and "incarnation 2" in inv.violations[0]


def _write_markers(root: Path, partition: str, markers: list[tuple[int, int, bool]]) -> None:
    d = root / partition
    d.mkdir(parents=True)
    data = b"".join(build_control_batch(pid, epoch, commit, 0, 1000, base_offset=i)
                    for i, (pid, epoch, commit) in enumerate(markers))
    (d / "00000000000000000000.log").write_bytes(data)


def test_a_transaction_committed_on_one_partition_and_aborted_on_another_is_caught(tmp_path: Path) -> None:
    _write_markers(tmp_path / "node1", "out-0", [(7, 3, True), (7, 4, False)])
    _write_markers(tmp_path / "node1", "__consumer_offsets-2", [(7, 3, True), (7, 4, False)])
    _write_markers(tmp_path / "node2", "out-0", [(7, 3, True)])  # another replica, agreeing
    inv = Invariants()
    inv.check_markers(9.0, [(OS_FS, tmp_path / "node1"), (OS_FS, tmp_path / "node2")])
    assert inv.violations == []
    _write_markers(tmp_path / "node2", "__consumer_offsets-2", [(7, 3, False)])  # its offsets aborted
    inv.check_markers(9.0, [(OS_FS, tmp_path / "node1"), (OS_FS, tmp_path / "node2")])
    assert len(inv.violations) == 1 and "producer 7 at epoch 3" in inv.violations[0]
