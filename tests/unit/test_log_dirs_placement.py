"""The broker's log directories (broker/log_dirs.py): meta.properties in each, finding the
partitions each holds at start, choosing where a new one goes, leftovers of a move."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.log_dirs import FUTURE_MARKER, LogDirs, least_loaded, read_properties
from storage.fs import OS_FS


def dirs(tmp_path: Path, *names: str, node_id: int = 1, cluster_id: str = "c1", metadata: str | None = None) -> LogDirs:
    paths = [str(tmp_path / n) for n in names]
    return LogDirs(paths, str(tmp_path / metadata) if metadata else paths[0], node_id, cluster_id, OS_FS)


def test_every_log_dir_gets_meta_properties_with_one_cluster_and_node_and_its_own_directory_id(tmp_path: Path) -> None:
    ld = dirs(tmp_path, "a", "b", metadata="meta")
    ld.prepare()
    props = {n: read_properties((tmp_path / n / "meta.properties").read_bytes()) for n in ("a", "b", "meta")}
    for p in props.values():
        assert (p["cluster.id"], p["node.id"], p["version"]) == ("c1", "1", "1")
    ids = {p["directory.id"] for p in props.values()}
    assert len(ids) == 3  # one per directory
    assert [d.dir_id for d in ld.dirs] == [ld.dirs[0].dir_id, ld.dirs[1].dir_id]
    # A restart reads them back: the ids stay.
    again = dirs(tmp_path, "a", "b", metadata="meta")
    again.prepare()
    assert [d.dir_id for d in again.dirs] == [d.dir_id for d in ld.dirs]
    assert all(isinstance(d.dir_id, uuid.UUID) for d in again.dirs)


def test_a_log_dir_of_another_node_or_cluster_is_refused(tmp_path: Path) -> None:
    dirs(tmp_path, "a", "b").prepare()
    with pytest.raises(ConfigError, match="node.id"):
        dirs(tmp_path, "a", "b", node_id=2).prepare()
    with pytest.raises(ConfigError, match="cluster.id"):
        dirs(tmp_path, "b", cluster_id="other").prepare()


def test_partitions_are_found_in_every_dir_and_leftovers_of_a_move_are_resolved(tmp_path: Path) -> None:
    for d, names in (("a", ["t-0", "t-2", "__cluster_metadata-0", "x.7c2f-delete"]), ("b", ["t-1", "u-0"])):
        for n in names:
            (tmp_path / d / n).mkdir(parents=True)
    # A copy being made (a future replica) whose move a crash interrupted: the replica stays where it
    # was, the copy too, and the move goes on from it. One whose old directory was already retired: it is
    # the replica.
    (tmp_path / "b" / "t-0").mkdir()
    (tmp_path / "b" / "t-0" / FUTURE_MARKER).write_bytes(b"")
    (tmp_path / "b" / "t-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "a" / "u-1").mkdir()
    (tmp_path / "a" / "u-1" / FUTURE_MARKER).write_bytes(b"")
    ld = dirs(tmp_path, "a", "b")
    ld.prepare()
    a, b = ld.dirs
    assert {k: d.path.name for k, d in ld.where.items()} == {("t", 0): "a", ("t", 2): "a", ("t", 1): "b",
                                                             ("u", 0): "b", ("u", 1): "a"}
    assert ld.resume == {("t", 0): b}
    assert (tmp_path / "b" / "t-0" / FUTURE_MARKER).exists()  # the interrupted copy is kept, still marked
    assert not (tmp_path / "a" / "u-1" / FUTURE_MARKER).exists()
    assert not (tmp_path / "a" / "x.7c2f-delete").exists()


def test_one_partition_in_two_dirs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a" / "t-0").mkdir(parents=True)
    (tmp_path / "b" / "t-0").mkdir(parents=True)
    with pytest.raises(ConfigError, match="t-0"):
        dirs(tmp_path, "a", "b").prepare()


def test_least_loaded_is_the_online_dir_with_fewest_partitions_first_listed_on_a_tie() -> None:
    assert least_loaded([(3, True), (1, True), (1, True)]) == 1
    assert least_loaded([(0, False), (5, True)]) == 1
    assert least_loaded([(2, True), (2, True)]) == 0
    assert least_loaded([(0, False)]) is None


def test_placement_spreads_new_partitions_and_follows_a_preference(tmp_path: Path) -> None:
    (tmp_path / "a" / "old-0").mkdir(parents=True)
    ld = dirs(tmp_path, "a", "b", "c")
    ld.prepare()
    placed = [ld.place(("t", i)).path.name for i in range(5)]
    assert placed == ["b", "c", "a", "b", "c"]  # a already held one
    ld.prefer(("t", 9), ld.dirs[0])
    assert ld.place(("t", 9)).path.name == "a"
    ld.forget(("t", 0))
    assert ld.place(("t", 10)).path.name == "b"


def test_with_a_dir_unreadable_a_lone_future_replica_is_left_alone_and_its_partition_unknown(tmp_path: Path) -> None:
    """The replica the copy was to replace may be on the unreadable disk, or already retired
    there: promoting the copy could serve an old log, removing it could lose the only one."""
    (tmp_path / "b" / "t-0").mkdir(parents=True)
    (tmp_path / "b" / "t-0" / FUTURE_MARKER).write_bytes(b"")
    (tmp_path / "c").write_bytes(b"not a directory")
    ld = dirs(tmp_path, "a", "b", "c")
    ld.prepare()
    assert [d.online for d in ld.dirs] == [True, True, False]
    assert (tmp_path / "b" / "t-0" / FUTURE_MARKER).exists()
    assert ("t", 0) not in ld.where and ld.resume == {} and ld.holds_unknown(("t", 0))
