"""Property test: random appends, reads, truncations, rolls, crashes and restarts against a model."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from _batches import idem, make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.batch import iter_batches
from storage import LogConfig, PartitionLog

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=90)

op = st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(st.integers(1, 4), st.integers(0, 120), st.integers(0, 200)),
                                          min_size=1, max_size=3)),
    st.tuples(st.just("read"), st.integers(0, 10_000), st.integers(0, 700)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),
    st.tuples(st.just("timestamp"), st.integers(0, 200)),
    st.tuples(st.just("roll"), st.just(0)),
    st.tuples(st.just("crash"), st.just(0)),
    st.tuples(st.just("restart"), st.just(0)),
    st.tuples(st.just("flush"), st.booleans()),
    st.tuples(st.just("tear"), st.integers(0, 10_000)),
    st.tuples(st.just("idem"), st.integers(1, 3)),
    st.tuples(st.just("retry"), st.integers(0, 6)),
)


def crash(log: PartitionLog) -> None:
    for seg in log._segments:
        seg._close_file()
    log._closed = True


@settings(max_examples=int(os.environ.get('STORAGE_MODEL_EXAMPLES', '60')), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=25))
def test_log_matches_model(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    tmp = Path(tempfile.mkdtemp())
    try:
        run(tmp / "p-0", ops)
    finally:
        shutil.rmtree(tmp)


def run(d: Path, ops: list[tuple]) -> None:  # type: ignore[type-arg]
    log = PartitionLog.open(d, CONFIG)
    model: list[tuple[int, int, int, bytes]] = []  # (base offset, count, timestamp, bytes after the header)
    sent: dict[int, bytes] = {}  # base offset -> the idempotent batch as sent
    for o in ops:
        kind = o[0]
        if kind == "append":
            data = b""
            pending = []
            for count, size, ts in o[1]:
                b = make_batch(count, value_size=size, timestamp=ts)
                data += b
                pending.append((count, ts, b[61:]))
            r = log.append(data, leader_epoch=0)
            base = r.first_offset
            assert base == (model[-1][0] + model[-1][1] if model else 0)
            for count, ts, body in pending:
                model.append((base, count, ts, body))
                base += count
            assert r.last_offset == base - 1
            log.high_watermark = log.log_end_offset
        elif kind == "idem":
            ours = [b for b in model if b[0] in sent]
            seq = 0
            if ours:
                last = sent[ours[-1][0]]
                seq = int.from_bytes(last[53:57], "big") + ours[-1][1]
            batch = idem(seq, o[1], pid=1, timestamp=50)
            r = log.append(batch, leader_epoch=0)
            assert not r.duplicate
            model.append((r.first_offset, o[1], 50, batch[61:]))
            sent[r.first_offset] = batch
            log.high_watermark = log.log_end_offset
        elif kind == "retry":
            ours = [b for b in model if b[0] in sent][-5:]
            if o[1] < len(ours):
                b = ours[-1 - o[1]]
                end = log.log_end_offset
                r = log.append(sent[b[0]], leader_epoch=0)
                assert r.duplicate and (r.first_offset, r.last_offset) == (b[0], b[0] + b[1] - 1)
                assert log.log_end_offset == end
        elif kind == "read":
            end = model[-1][0] + model[-1][1] if model else 0
            offset = o[1] % (end + 1)
            r = log.read(offset, o[2])
            got = [(h.base_offset, h.last_offset_delta + 1, bytes(r.data[p + 61:p + h.size]))
                   for p, h in iter_batches(r.data)]
            if offset == end:
                assert got == []
                continue
            i = next(i for i, b in enumerate(model) if b[0] + b[1] > offset)
            assert got, "at least one batch"
            assert got[0][0] == model[i][0]
            assert len(got) == 1 or len(r.data) <= o[2]
            for j, g in enumerate(got):
                assert g == (model[i + j][0], model[i + j][1], model[i + j][3])
        elif kind == "truncate":
            end = model[-1][0] + model[-1][1] if model else 0
            offset = o[1] % (end + 1)
            log.truncate_to(offset)
            model = [b for b in model if b[0] + b[1] <= offset]
            sent = {k: v for k, v in sent.items() if any(b[0] == k for b in model)}
            assert log.log_end_offset == (model[-1][0] + model[-1][1] if model else 0)
        elif kind == "timestamp":
            found = log.offset_for_timestamp(o[1])
            expected = next(((b[0], b[2]) for b in model if b[2] >= o[1]), None)
            assert found == expected
        elif kind == "roll":
            log.roll()
        elif kind == "flush":
            log.flush()
            if o[1]:
                log.checkpoint()
        elif kind == "tear":
            # a crash that loses part of what was never fsynced (the tail above the recovery point)
            seg_base = log.segment_base_offsets[-1]
            in_seg = [b for b in model if b[0] >= seg_base]
            unflushed = sum(61 + len(b[3]) for b in in_seg if b[0] >= log.recovery_point)
            cut = o[1] % (unflushed + 1)
            crash(log)
            f = d / f"{seg_base:020d}.log"
            new_size = f.stat().st_size - cut
            os.truncate(f, new_size)
            pos, keep = 0, len(model) - len(in_seg)
            for b in in_seg:
                pos += 61 + len(b[3])
                if pos > new_size:
                    break
                keep += 1
            model = model[:keep]
            sent = {k: v for k, v in sent.items() if any(b[0] == k for b in model)}
            log = PartitionLog.open(d, CONFIG)
            assert log.log_end_offset == (model[-1][0] + model[-1][1] if model else seg_base)
            log.high_watermark = log.log_end_offset
        elif kind in ("crash", "restart"):
            if kind == "crash":
                crash(log)
            else:
                log.close()
            log = PartitionLog.open(d, CONFIG)
            assert log.log_end_offset == (model[-1][0] + model[-1][1] if model else 0)
            log.high_watermark = log.log_end_offset
    log.close()
