"""The chaos history checker (helpers.chaos.checker) on small hand-built histories: a clean one that
must pass, and one broken copy per anomaly kind that must report exactly that kind, citing the right
operations. A checker that misses a kind, or cries wolf on a clean run, makes the chaos suite useless."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.chaos.checker import ANOMALIES, HistoryError, Op, Report, abbreviate, check, load, main

REPO_ROOT = Path(__file__).resolve().parents[2]

# txn numbers of the copier, as the workload numbers them (pipeline 1 from 1_000_000)
C_OK, C_ABORTED, C_OK2 = 1_000_001, 1_000_002, 1_000_003


class History:
    """A history under construction: `add` appends an operation and names its line."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.line: dict[str, int] = {}

    def add(self, name: str, **op: Any) -> int:
        self.ops.append(op)
        self.line[name] = len(self.ops)
        return len(self.ops)

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self.ops[self.line[name] - 1]

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(op) + "\n" for op in self.ops))
        return path

    def check(self, tmp_path: Path) -> Report:
        return check(load(self.write(tmp_path / "history.jsonl")))


def clean() -> History:
    """A healthy run. Partition 0 of mixed: 0 p1-0-1, 1 p1-0-2, 2 t1-0-1-0, 3 commit marker,
    4 t1-0-2-0 (aborted), 5 abort marker, 6 p2-0-1; partition 1: 0 t1-0-1-1, 1 commit marker.
    cout partition 0: 0-1 txn C_OK, 2 marker, 3 txn C_ABORTED, 4 marker, 5 txn C_OK2, 6 marker."""
    h = History()
    h.add("meta", f="meta", topic="mixed", copier={"input": "cin", "output": "cout"}, txn_timeout_ms=10000, seed=1)
    h.add("note", f="note", what="started", t=0.5)
    h.add("s1", f="send", proc="p1", inc=0, seq=1, topic="mixed", partition=0, value="p1-0-1", status="ok",
          offset=0, t0=1.0, t1=1.1)
    h.add("s2", f="send", proc="p1", inc=0, seq=2, topic="mixed", partition=0, value="p1-0-2", status="ok",
          offset=1, t0=1.0, t1=1.2)
    h.add("s3", f="send", proc="p1", inc=0, seq=3, topic="mixed", partition=1, value="p1-0-3", status="info",
          offset=None, t0=1.0, t1=9.0)
    h.add("nemesis", f="nemesis", what="partition", t=1.5)
    h.add("txn1", f="txn", proc="t1", inc=0, seq=1, topic="mixed", outcome="commit", t0=1.5, tc=2.0, t1=2.1,
          sends=[{"partition": 0, "value": "t1-0-1-0", "offset": 2}, {"partition": 1, "value": "t1-0-1-1", "offset": 0}])
    h.add("txn2", f="txn", proc="t1", inc=0, seq=2, topic="mixed", outcome="abort", t0=2.5, tc=3.0, t1=3.1,
          sends=[{"partition": 0, "value": "t1-0-2-0", "offset": 4}])
    h.add("s4", f="send", proc="p2", inc=0, seq=1, topic="mixed", partition=0, value="p2-0-1", status="ok",
          offset=6, t0=3.5, t1=3.6)
    h.add("rc1", f="poll", proc="c-rc", inc=1, iso="read_committed", topic="mixed", t0=1.2, t1=1.3,
          recs=[[0, 0, "p1-0-1"], [0, 1, "p1-0-2"]])
    h.add("rc2", f="poll", proc="c-rc", inc=1, iso="read_committed", topic="mixed", t0=4.0, t1=5.0,
          recs=[[0, 2, "t1-0-1-0"], [1, 0, "t1-0-1-1"], [0, 6, "p2-0-1"]])
    h.add("ru1", f="poll", proc="c-ru", inc=1, iso="read_uncommitted", topic="mixed", t0=4.0, t1=5.0,
          recs=[[0, 0, "p1-0-1"], [0, 1, "p1-0-2"], [0, 2, "t1-0-1-0"], [0, 4, "t1-0-2-0"], [1, 0, "t1-0-1-1"],
                [0, 6, "p2-0-1"]])
    h.add("ver1", f="poll", proc="verifier", inc=1, iso="read_committed", topic="cout", t0=4.0, t1=5.0,
          recs=[[0, 0, f"t{C_OK}|in-0"], [0, 1, f"t{C_OK}|in-1"], [0, 5, f"t{C_OK2}|in-2"]])
    h.add("off_m0", f="offsets", topic="mixed", partition=0, hw=7, lso=7, waited_ms=10)
    h.add("off_m1", f="offsets", topic="mixed", partition=1, hw=2, lso=2, waited_ms=10)
    h.add("off_c0", f="offsets", topic="cout", partition=0, hw=7, lso=7, waited_ms=10)
    h.add("final_rc", f="final-read", iso="read_committed", topic="mixed", complete=True, ends={"0": 7, "1": 2},
          recs=[[0, 0, "p1-0-1"], [0, 1, "p1-0-2"], [0, 2, "t1-0-1-0"], [0, 6, "p2-0-1"], [1, 0, "t1-0-1-1"]])
    h.add("final_ru", f="final-read", iso="read_uncommitted", topic="mixed", complete=True, ends={"0": 7, "1": 2},
          recs=[[0, 0, "p1-0-1"], [0, 1, "p1-0-2"], [0, 2, "t1-0-1-0"], [0, 4, "t1-0-2-0"], [0, 6, "p2-0-1"],
                [1, 0, "t1-0-1-1"]])
    h.add("final_cout", f="final-read", iso="read_committed", topic="cout", complete=True, ends={"0": 7},
          recs=[[0, 0, f"t{C_OK}|in-0"], [0, 1, f"t{C_OK}|in-1"], [0, 5, f"t{C_OK2}|in-2"]])
    h.add("copier", f="copier", pipeline="c1", input_topic="cin", output_topic="cout",
          input=[[0, 0, "in-0"], [0, 1, "in-1"], [0, 2, "in-2"]], group_offsets={"0": 3},
          committed=[C_OK, C_OK2], aborted=[C_ABORTED], unknown=[])
    h.add("hanging", f="hanging", txns=[])
    # a zombie: producer 7 at epoch 3, fenced at t=2.2 by epoch 4, then writing and committing anyway
    h.add("fence", f="fence", proc="zombie", topic="mixed", tid="z", pid=7, epoch=3, by=4, t=2.2,
          writes=[{"partition": 0, "value": "z-1-c", "t0": 2.3, "error": "INVALID_PRODUCER_EPOCH", "offset": None},
                  {"partition": 1, "value": "z-1-d", "t0": 2.3, "error": "io: timed out", "offset": None}],
          commit="PRODUCER_FENCED")
    h.add("end", f="note", what="end")
    return h


def only(report: Report, kind: str) -> list[tuple[int, ...]]:
    """The lines cited by each anomaly, asserting `kind` is the only kind reported."""
    assert set(report.anomalies) == {kind}, report.render()
    assert not report.ok
    return [a.lines for a in report.anomalies[kind]]


def drop(recs: list[list[Any]], value: str) -> None:
    recs[:] = [r for r in recs if r[2] != value]


# ------------------------------------------------------------------------------------------ clean


def test_a_clean_history_reports_nothing(tmp_path: Path) -> None:
    report = clean().check(tmp_path)
    assert report.ok and report.anomalies == {}, report.render()
    c = report.counts
    assert (c["send-ok"], c["send-info"], c["txn-commit"], c["txn-abort"], c["txn-info"]) == (3, 1, 1, 1, 0)
    assert (c["poll"], c["poll-records"], c["final-read"], c["final-read-records"]) == (4, 2 + 3 + 6 + 3, 3, 14)
    assert c["records-read"] == 14 + 14
    assert c["ops"] == len(clean().ops) and c["nemesis"] == 1 and c["note"] == 2
    assert "anomalies: none" in report.render()
    assert report.to_json()["ok"] is True


def test_every_kind_has_a_definition() -> None:
    assert all(isinstance(v, str) and v for v in ANOMALIES.values())
    assert {"lost-write", "unseen", "duplicate", "aborted-read", "precommitted-read", "inconsistent-offsets",
            "nonmonotonic-send", "int-nonmonotonic-send", "nonmonotonic-poll", "int-nonmonotonic-poll",
            "poll-skip", "int-poll-skip", "hanging-txn", "copier-lost", "copier-duplicate", "fenced-write",
            "incomplete-history", "stall"} == set(ANOMALIES)


def test_a_copier_stall_is_an_anomaly(tmp_path: Path) -> None:
    """The workload's copier watch records a copier that made no progress for its STALL_S; that is a
    finding (a client call stuck past its timeout), not something a restart makes go away."""
    h = clean()
    h.add("stall", f="stall", pipeline="c1", since=4.0, t=125.0, summary="pipeline: 2/3 input committed")
    assert only(h.check(tmp_path), "stall") == [(h.line["stall"],)]


# ------------------------------------------------------------------------------------- mixed topic


def test_lost_write_of_an_acknowledged_send(tmp_path: Path) -> None:
    h = clean()
    drop(h["final_rc"]["recs"], "p1-0-2")
    assert only(h.check(tmp_path), "lost-write") == [(h.line["s2"], h.line["final_rc"])]


def test_lost_write_of_a_committed_txn_value_when_the_final_read_got_past_it(tmp_path: Path) -> None:
    h = clean()
    h["final_rc"]["complete"] = False  # but it read partition 0 up to offset 6, past offset 2
    drop(h["final_rc"]["recs"], "t1-0-1-0")
    report = h.check(tmp_path)
    assert only(report, "lost-write") == [(h.line["txn1"], h.line["final_rc"])]
    txn_evidence = report.anomalies["lost-write"][0].evidence[0].op
    assert txn_evidence["outcome"] == "commit"


def test_unseen_when_the_final_read_stopped_short(tmp_path: Path) -> None:
    h = clean()
    h["final_rc"]["complete"] = False
    for name in ("final_rc", "final_ru", "rc2", "ru1"):
        drop(h[name]["recs"], "p2-0-1")
    assert only(h.check(tmp_path), "unseen") == [(h.line["s4"], h.line["final_rc"])]


def test_a_value_read_somewhere_is_not_unseen(tmp_path: Path) -> None:
    h = clean()
    h["final_rc"]["complete"] = False
    drop(h["final_rc"]["recs"], "p2-0-1")  # the polls and the read_uncommitted final-read have it
    assert h.check(tmp_path).ok


def test_duplicate(tmp_path: Path) -> None:
    h = clean()
    h["ru1"]["recs"].append([1, 1, "p1-0-1"])  # also at 0@0
    assert only(h.check(tmp_path), "duplicate") == [(h.line["s1"], h.line["ru1"])]


def _stored(h: History, p0: list[int], p1: list[int] | None) -> None:
    """A batches line: the batch holding 0@0 and, if given, the one holding 1@1."""
    parts = {"0": {"node": 1, "batches": [p0]}}
    if p1 is not None:
        parts["1"] = {"node": 2, "batches": [p1]}
    h.add("batches", f="batches", topic="mixed", partitions=parts)


def _bump(h: History, name: str, epoch: int, reason: str = "1 message(s) timed out on mixed [0]",
          pid: int = 7, proc: str = "p1") -> None:
    """A bump line as librdkafka logs it: the PID before the bump, then the reason."""
    h.add(name, f="bump", proc=proc, inc=0, t=1.05,
          what=f"DRAIN [thrd:main]: Beginning partition drain in state Assigned for PID{{Id:{pid},Epoch:{epoch}}} "
               f"epoch bump for 1 partition(s) with in-flight requests: {reason}")


def _resent(h: History, epochs: tuple[int, int] = (0, 1)) -> None:
    """p1-0-1 acknowledged at 0@0 and read again at 1@1 by the read_uncommitted poll, stored by
    producer 7 under `epochs`: what a librdkafka re-send after a message timeout looks like."""
    h["ru1"]["recs"].append([1, 1, "p1-0-1"])
    _stored(h, [0, 0, 7, epochs[0], 0], [1, 1, 7, epochs[1], 0])


def test_a_duplicate_under_two_producer_epochs_is_the_clients_resend(tmp_path: Path) -> None:
    h = clean()
    _resent(h)
    _bump(h, "bump", 0)
    report = h.check(tmp_path)
    assert report.ok and not report.anomalies, report.render()
    assert [a.lines for a in report.client["epoch-resend"]] == [(h.line["s1"], h.line["ru1"], h.line["bump"])]
    assert "producer 7 epoch 0" in report.client["epoch-resend"][0].explanation
    assert "1 epoch bump line(s)" in report.client["epoch-resend"][0].explanation
    assert "timed out" in report.client["epoch-resend"][0].explanation
    assert "client findings (not anomalies): epoch-resend 1" in report.render()


def test_a_resend_over_several_bumps_each_for_a_timeout_is_the_clients(tmp_path: Path) -> None:
    h = clean()
    _resent(h, (0, 2))
    _bump(h, "bump0", 0)
    _bump(h, "bump0-again", 0, "3 message(s) timed out on mixed [1]")  # one bump, asked for twice
    _bump(h, "bump1", 1)
    report = h.check(tmp_path)
    assert report.ok and [a.lines for a in report.client["epoch-resend"]] == [
        (h.line["s1"], h.line["ru1"], h.line["bump0"], h.line["bump0-again"], h.line["bump1"])], report.render()


def test_a_duplicate_under_one_producer_epoch_is_the_brokers(tmp_path: Path) -> None:
    for p1 in ([1, 1, 7, 0, 0], [1, 1, 8, 1, 0], None):  # same epoch; another producer; batch unknown
        h = clean()
        h["ru1"]["recs"].append([1, 1, "p1-0-1"])
        _stored(h, [0, 0, 7, 0, 0], p1)
        report = h.check(tmp_path)
        assert only(report, "duplicate") == [(h.line["s1"], h.line["ru1"])], p1
        assert not report.client


def test_a_transactional_value_under_two_epochs_is_a_duplicate(tmp_path: Path) -> None:
    """Only a plain idempotent send is re-sent by the client under a new epoch: a transaction's
    value under a new epoch belongs to another transaction, so two copies are the broker's."""
    h = clean()
    h["ru1"]["recs"].append([1, 1, "t1-0-1-0"])  # txn1 wrote it at 0@2
    h.add("batches", f="batches", topic="mixed", partitions={
        "0": {"node": 1, "batches": [[2, 2, 7, 0, 0]]}, "1": {"node": 2, "batches": [[1, 1, 7, 1, 0]]}})
    _bump(h, "bump", 0, proc="t1")
    report = h.check(tmp_path)
    assert only(report, "duplicate") == [(h.line["txn1"], h.line["ru1"])], report.render()
    assert "transaction" in report.anomalies["duplicate"][0].explanation
    assert not report.client


def test_two_copies_a_read_committed_reader_sees_are_a_duplicate(tmp_path: Path) -> None:
    """A re-send may be excused only while at most one copy is visible at read_committed: a
    read_committed reader that gets the value twice has been handed a duplicate, whoever sent it."""
    h = clean()
    _resent(h)
    h["final_rc"]["recs"].append([1, 1, "p1-0-1"])
    _bump(h, "bump", 0)
    report = h.check(tmp_path)
    # cited: the ack and the first read of each position, then the read_committed reads of both
    assert only(report, "duplicate") == [(h.line["s1"], h.line["ru1"], h.line["rc1"], h.line["final_rc"])], \
        report.render()
    assert "2 copies visible at read_committed" in report.anomalies["duplicate"][0].explanation
    assert not report.client


def test_a_resend_after_a_bump_for_another_reason_is_a_duplicate(tmp_path: Path) -> None:
    """librdkafka re-sends under a new epoch after its own message timeout; a bump for a broker's
    error (a sequence gap, an unknown producer) is the broker losing state it should have kept."""
    h = clean()
    _resent(h)
    _bump(h, "bump", 0, "ProduceRequest for mixed [0] with 1 message(s) failed due to sequence "
                        "desynchronization with broker 1 (OUT_OF_ORDER_SEQUENCE_NUMBER)")
    report = h.check(tmp_path)
    assert only(report, "duplicate") == [(h.line["s1"], h.line["ru1"], h.line["bump"])], report.render()
    assert "not a timeout" in report.anomalies["duplicate"][0].explanation
    assert not report.client


def test_a_resend_across_a_bump_with_no_recorded_reason_is_a_duplicate(tmp_path: Path) -> None:
    """Every bump between the two copies' epochs must be accounted for: here 1 -> 2 is not, and a
    bump of another producer id does not stand in for it."""
    h = clean()
    _resent(h, (0, 2))
    _bump(h, "bump0", 0)
    _bump(h, "other", 1, pid=8, proc="p2")
    report = h.check(tmp_path)
    assert only(report, "duplicate") == [(h.line["s1"], h.line["ru1"], h.line["bump0"])], report.render()
    assert "no recorded reason" in report.anomalies["duplicate"][0].explanation
    assert not report.client


def test_aborted_read_by_a_read_committed_poll(tmp_path: Path) -> None:
    h = clean()
    h["rc2"]["recs"].insert(1, [0, 4, "t1-0-2-0"])
    report = h.check(tmp_path)
    assert only(report, "aborted-read") == [(h.line["rc2"], h.line["txn2"])]
    assert "t1/0/2" in report.anomalies["aborted-read"][0].explanation


def test_aborted_read_by_the_read_committed_final_read(tmp_path: Path) -> None:
    h = clean()
    h["rc2"]["recs"].insert(1, [0, 4, "t1-0-2-0"])
    h["final_rc"]["recs"].insert(3, [0, 4, "t1-0-2-0"])
    lines = only(h.check(tmp_path), "aborted-read")
    assert sorted(lines) == [(h.line["rc2"], h.line["txn2"]), (h.line["final_rc"], h.line["txn2"])]


def test_read_uncommitted_may_read_aborted_data(tmp_path: Path) -> None:
    h = clean()
    assert [0, 4, "t1-0-2-0"] in h["ru1"]["recs"] and [0, 4, "t1-0-2-0"] in h["final_ru"]["recs"]
    assert h.check(tmp_path).ok


def test_precommitted_read(tmp_path: Path) -> None:
    h = clean()
    h["rc2"].update(t0=1.8, t1=1.9)  # txn1's commit was invoked at 2.0
    drop(h["rc2"]["recs"], "p2-0-1")
    report = h.check(tmp_path)
    assert only(report, "precommitted-read") == [(h.line["rc2"], h.line["txn1"])]


def test_precommitted_read_of_a_txn_that_never_invoked_commit(tmp_path: Path) -> None:
    h = clean()
    h["txn1"].update(outcome="info", tc=None)  # unknown; never reached commit_transaction
    assert only(h.check(tmp_path), "precommitted-read") == [(h.line["rc2"], h.line["txn1"])]


def test_inconsistent_offsets(tmp_path: Path) -> None:
    h = clean()
    h["ru1"]["recs"][4] = [1, 0, "p1-0-3"]  # txn1 was acknowledged at 1@0
    report = h.check(tmp_path)
    assert only(report, "inconsistent-offsets") == [(h.line["txn1"], h.line["ru1"])]
    assert "mixed/1@0" in report.anomalies["inconsistent-offsets"][0].explanation


def _add_p3(h: History, offsets: tuple[int, int]) -> None:
    h.add("p3a", f="send", proc="p3", inc=0, seq=1, topic="mixed", partition=2, value="p3-0-1", status="ok",
          offset=offsets[0], t0=1.0, t1=1.1)
    h.add("p3b", f="send", proc="p3", inc=0, seq=2, topic="mixed", partition=2, value="p3-0-2", status="ok",
          offset=offsets[1], t0=1.0, t1=1.1)
    for name in ("final_rc", "final_ru"):
        h[name]["recs"] += sorted([[2, offsets[0], "p3-0-1"], [2, offsets[1], "p3-0-2"]])


def test_nonmonotonic_send(tmp_path: Path) -> None:
    h = clean()
    _add_p3(h, (1, 0))
    assert only(h.check(tmp_path), "nonmonotonic-send") == [(h.line["p3a"], h.line["p3b"])]


def test_different_incarnations_are_not_compared(tmp_path: Path) -> None:
    h = clean()
    _add_p3(h, (1, 0))
    h["p3b"]["inc"] = 1
    assert h.check(tmp_path).ok


def test_int_nonmonotonic_send(tmp_path: Path) -> None:
    h = clean()
    h.add("t2", f="txn", proc="t2", inc=0, seq=1, topic="mixed", outcome="commit", t0=1.0, tc=1.5, t1=1.6,
          sends=[{"partition": 2, "value": "t2-0-1-0", "offset": 1}, {"partition": 2, "value": "t2-0-1-1", "offset": 0}])
    for name in ("final_rc", "final_ru"):
        h[name]["recs"] += [[2, 0, "t2-0-1-1"], [2, 1, "t2-0-1-0"]]
    report = h.check(tmp_path)
    assert only(report, "int-nonmonotonic-send") == [(h.line["t2"],)]


def test_nonmonotonic_poll(tmp_path: Path) -> None:
    h = clean()
    h.add("rc3", f="poll", proc="c-rc", inc=1, iso="read_committed", topic="mixed", t0=6.0, t1=6.1,
          recs=[[0, 6, "p2-0-1"]])
    assert only(h.check(tmp_path), "nonmonotonic-poll") == [(h.line["rc2"], h.line["rc3"])]


def test_a_new_consumer_incarnation_starts_over(tmp_path: Path) -> None:
    h = clean()
    h.add("rc3", f="poll", proc="c-rc", inc=2, iso="read_committed", topic="mixed", t0=6.0, t1=6.1,
          recs=[[0, 0, "p1-0-1"]])
    assert h.check(tmp_path).ok


def test_int_nonmonotonic_poll(tmp_path: Path) -> None:
    h = clean()
    h["ru1"]["recs"].append([0, 6, "p2-0-1"])
    assert only(h.check(tmp_path), "int-nonmonotonic-poll") == [(h.line["ru1"],)]


def test_poll_skip(tmp_path: Path) -> None:
    h = clean()
    drop(h["rc2"]["recs"], "t1-0-1-0")  # c-rc goes from 0@1 (first poll) to 0@6
    report = h.check(tmp_path)
    assert only(report, "poll-skip") == [(h.line["rc1"], h.line["rc2"], h.line["final_rc"])]
    assert "skipping 1 record(s)" in report.anomalies["poll-skip"][0].explanation


def test_int_poll_skip(tmp_path: Path) -> None:
    h = clean()
    drop(h["ru1"]["recs"], "t1-0-1-0")  # read_uncommitted goes from 0@1 to 0@4 in one poll
    assert only(h.check(tmp_path), "int-poll-skip") == [(h.line["ru1"], h.line["final_ru"])]


def test_skipping_what_the_isolation_level_hides_is_fine(tmp_path: Path) -> None:
    h = clean()  # c-rc goes 0@2 -> 0@6 past the aborted 0@4 in the clean history already
    assert h.check(tmp_path).ok
    h["final_ru"]["f"] = "note"  # without a read_uncommitted final-read, that skip check is not made
    drop(h["ru1"]["recs"], "t1-0-1-0")
    assert h.check(tmp_path).ok


def test_hanging_txn(tmp_path: Path) -> None:
    h = clean()
    h["off_m0"]["lso"] = 3
    h["hanging"]["txns"] = [{"topic": "mixed", "partition": 0, "producer_id": 7, "start_offset": 3}]
    assert only(h.check(tmp_path), "hanging-txn") == [(h.line["off_m0"],), (h.line["hanging"],)]


def test_a_failed_find_hanging_is_not_a_pass(tmp_path: Path) -> None:
    h = clean()
    h["hanging"]["txns"] = [{"error": "find-hanging failed: timed out"}]
    assert only(h.check(tmp_path), "incomplete-history") == [(h.line["hanging"],)]


# ------------------------------------------------------------------------------------------- zombie


def test_a_fenced_epochs_acknowledged_write_is_a_fenced_write(tmp_path: Path) -> None:
    h = clean()
    h["fence"]["writes"][0].update(error="NONE", offset=7)
    report = h.check(tmp_path)
    assert only(report, "fenced-write") == [(h.line["fence"],)]
    assert "'z-1-c'" in report.anomalies["fenced-write"][0].explanation


def test_a_fenced_epochs_commit_answered_as_done_is_a_fenced_write(tmp_path: Path) -> None:
    h = clean()
    h["fence"]["commit"] = "NONE"
    assert only(h.check(tmp_path), "fenced-write") == [(h.line["fence"],)]


@pytest.mark.parametrize("read", ["final_rc", "ru1"])
def test_a_fenced_epochs_write_read_by_anyone_was_stored(tmp_path: Path, read: str) -> None:
    """Its answer lost (io) or not: a reader that returns it proves the broker stored it."""
    h = clean()
    h[read]["recs"].append([1, 1, "z-1-d"])
    report = h.check(tmp_path)
    assert only(report, "fenced-write") == [(h.line["fence"], h.line[read])]
    assert "'z-1-d'" in report.anomalies["fenced-write"][0].explanation


def test_a_fence_line_without_its_epochs_is_refused(tmp_path: Path) -> None:
    h = clean()
    del h["fence"]["by"]
    with pytest.raises(HistoryError, match="fence"):
        load(h.write(tmp_path / "h.jsonl"))


# ------------------------------------------------------------------------------------------- copier


def test_copier_lost(tmp_path: Path) -> None:
    h = clean()
    drop(h["final_cout"]["recs"], f"t{C_OK2}|in-2")
    report = h.check(tmp_path)
    assert only(report, "copier-lost") == [(h.line["copier"], h.line["final_cout"])]
    assert "'in-2'" in report.anomalies["copier-lost"][0].explanation


def test_an_unfinished_copier_is_judged_up_to_its_groups_offset(tmp_path: Path) -> None:
    h = clean()
    drop(h["final_cout"]["recs"], f"t{C_OK2}|in-2")
    h["copier"]["group_offsets"] = {"0": 2}  # it never copied in-2: not lost, unfinished
    report = h.check(tmp_path)
    assert only(report, "incomplete-history") == [(h.line["copier"],)]
    assert "did not finish" in report.anomalies["incomplete-history"][0].explanation
    h["copier"]["group_offsets"] = {"0": 1}  # in-1 is copied, yet its offset was never committed
    report = h.check(tmp_path)
    assert sorted(report.anomalies) == ["copier-duplicate", "incomplete-history"]
    assert [a.lines for a in report.anomalies["copier-duplicate"]] == [(h.line["copier"], h.line["final_cout"])]
    assert "would copy it again" in report.anomalies["copier-duplicate"][0].explanation


def test_a_copier_line_without_group_offsets_is_refused(tmp_path: Path) -> None:
    h = clean()
    h["copier"]["group_offsets"] = {"1": 3}
    with pytest.raises(HistoryError, match="group_offsets"):
        load(h.write(tmp_path / "h.jsonl"))


def test_copier_duplicate_in_the_final_read(tmp_path: Path) -> None:
    h = clean()
    h["final_cout"]["recs"].append([0, 7, "t1000004|in-0"])
    h["copier"]["committed"].append(1_000_004)
    assert only(h.check(tmp_path), "copier-duplicate") == [(h.line["copier"], h.line["final_cout"])]


def test_copier_duplicate_seen_by_the_verifier(tmp_path: Path) -> None:
    h = clean()
    h.add("ver2", f="poll", proc="verifier", inc=1, iso="read_committed", topic="cout", t0=6.0, t1=6.1,
          recs=[[0, 7, "t1000004|in-1"]])
    h.add("ver3", f="poll", proc="verifier", inc=2, iso="read_committed", topic="cout", t0=6.0, t1=6.1,
          recs=[[0, 7, "t1000004|in-1"]])  # a new incarnation: seeing it once is no duplicate
    lines = only(h.check(tmp_path), "copier-duplicate")
    # the final-read does not have it: that alone is no copier anomaly (and the verifier's read is
    # no inconsistency either: nothing else claims 0@7)
    assert lines == [(h.line["ver1"], h.line["ver2"], h.line["copier"])]


def test_aborted_read_of_copier_output(tmp_path: Path) -> None:
    h = clean()
    h["ver1"]["recs"].insert(2, [0, 3, f"t{C_ABORTED}|in-2"])
    report = h.check(tmp_path)
    assert only(report, "aborted-read") == [(h.line["ver1"], h.line["copier"])]
    copier_ev = report.anomalies["aborted-read"][0].evidence[1].op
    assert copier_ev["aborted"] == [C_ABORTED]


# --------------------------------------------------------------------------------- missing pieces


def test_missing_read_committed_final_read(tmp_path: Path) -> None:
    h = clean()
    h["final_rc"]["topic"] = "elsewhere"  # the mixed topic has none now
    h["final_rc"]["recs"] = []
    report = h.check(tmp_path)
    assert only(report, "incomplete-history") == [(h.line["meta"],)]
    text = " ".join(a.explanation for a in report.anomalies["incomplete-history"])
    assert "mixed" in text and "lost-write" in text


def test_missing_copier_line(tmp_path: Path) -> None:
    h = clean()
    h["copier"].update(f="note")
    report = h.check(tmp_path)
    assert only(report, "incomplete-history") == [(h.line["meta"],)]
    assert "copier" in report.anomalies["incomplete-history"][0].explanation


def test_incomplete_copier_output_read_is_not_a_pass(tmp_path: Path) -> None:
    h = clean()
    h["final_cout"]["complete"] = False
    drop(h["final_cout"]["recs"], f"t{C_OK2}|in-2")
    assert only(h.check(tmp_path), "incomplete-history") == [(h.line["copier"], h.line["final_cout"])]


def test_an_empty_history_is_not_clean(tmp_path: Path) -> None:
    (tmp_path / "h.jsonl").write_text("")
    assert set(check(load(tmp_path / "h.jsonl")).anomalies) == {"incomplete-history"}


# ---------------------------------------------------------------------------- loading, reporting


def test_load_numbers_lines_and_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"f":"note"}\n\n{"f":"meta","topic":"x"}\n')
    assert [(op.line, op.f) for op in load(path)] == [(1, "note"), (3, "meta")]
    for bad in ('{"f":"note"}\n{"f":"no', '[1,2]\n', '{"f":"send","proc":"p"}\n',
                '{"f":"poll","proc":"c","inc":1,"iso":"read_committed","topic":"t","recs":[[0,"x","v"]],"t1":1}\n'):
        path.write_text(bad)
        with pytest.raises(HistoryError):
            load(path)


def test_a_value_written_twice_is_an_invalid_history() -> None:
    send = {"f": "send", "proc": "p", "inc": 0, "seq": 1, "topic": "t", "partition": 0, "value": "v",
            "status": "ok", "offset": 0}
    with pytest.raises(HistoryError):
        check([Op(1, send), Op(2, {**send, "seq": 2})])


def test_abbreviate_keeps_the_records_in_question_and_their_neighbours() -> None:
    op = {"f": "poll", "recs": [[0, i, f"v{i}"] for i in range(500)], "proc": "c"}
    cut = abbreviate(op, {"recs": [250]}, limit=5)
    assert cut["recs"] == ["...(248 more)", [0, 248, "v248"], [0, 249, "v249"], [0, 250, "v250"],
                           [0, 251, "v251"], [0, 252, "v252"], "...(247 more)"]
    assert abbreviate(op)["recs"][:2] == [[0, 0, "v0"], [0, 1, "v1"]]
    assert len(op["recs"]) == 500  # the op itself is untouched


def test_evidence_of_a_long_poll_is_abbreviated(tmp_path: Path) -> None:
    h = clean()
    h["ru1"]["recs"] = [[3, i, f"x{i}"] for i in range(300)] + h["ru1"]["recs"] + [[0, 6, "p2-0-1"]]
    report = h.check(tmp_path)
    (anomaly,) = report.anomalies["int-nonmonotonic-poll"]
    recs = anomaly.evidence[0].op["recs"]
    assert len([r for r in recs if isinstance(r, list)]) <= 10
    assert [0, 6, "p2-0-1"] in recs


def test_render_and_json(tmp_path: Path) -> None:
    h = clean()
    drop(h["final_rc"]["recs"], "p1-0-2")
    report = h.check(tmp_path)
    text = report.render()
    assert "lost-write x1" in text and f"line {h.line['s2']}:" in text
    out = report.to_json()
    assert json.loads(json.dumps(out)) == out
    assert out["ok"] is False and out["anomaly_counts"] == {"lost-write": 1}
    assert out["anomalies"]["lost-write"][0]["evidence"][0]["line"] == h.line["s2"]


def test_main_writes_json_and_returns_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = clean()
    path = h.write(tmp_path / "clean.jsonl")
    assert main([str(path), "--json", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["ok"] is True
    assert "anomalies: none" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.jsonl")]) == 2


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.chaos.check", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


def test_the_command_line_exit_status(tmp_path: Path) -> None:
    good = clean().write(tmp_path / "clean.jsonl")
    broken = clean()
    broken.ops = copy.deepcopy(broken.ops)
    drop(broken["final_rc"]["recs"], "p1-0-2")
    bad = broken.write(tmp_path / "broken.jsonl")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n")

    res = _run_cli(str(good), "--json", str(tmp_path / "clean.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "clean.json").read_text())["ok"] is True
    res = _run_cli(str(bad))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "lost-write" in res.stdout
    res = _run_cli(str(garbage))
    assert res.returncode == 2, res.stdout + res.stderr
