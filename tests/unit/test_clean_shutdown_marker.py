"""The clean-shutdown marker (broker/lifecycle.py): what a broker tells the controller about its
last stop as PreviousBrokerEpoch (KIP-966). The marker is taken away when read, so a crash after
the start is an unclean shutdown again."""

from __future__ import annotations

from pathlib import Path

from broker.lifecycle import CLEAN_SHUTDOWN_FILE, mark_clean_shutdown, take_clean_shutdown_epoch
from storage.fs import OS_FS


def test_a_clean_stop_gives_its_epoch_back_once(tmp_path: Path) -> None:
    assert take_clean_shutdown_epoch(OS_FS, tmp_path) == -1  # never stopped cleanly
    mark_clean_shutdown(OS_FS, tmp_path, 7)
    assert take_clean_shutdown_epoch(OS_FS, tmp_path) == 7
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert take_clean_shutdown_epoch(OS_FS, tmp_path) == -1  # killed after that start: unclean


def test_an_unregistered_stop_or_an_unreadable_marker_is_unclean(tmp_path: Path) -> None:
    mark_clean_shutdown(OS_FS, tmp_path, None)  # stopped before it ever registered: no epoch to give back
    assert take_clean_shutdown_epoch(OS_FS, tmp_path) == -1
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b"{not json")
    assert take_clean_shutdown_epoch(OS_FS, tmp_path) == -1
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
