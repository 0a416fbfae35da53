"""bench.codec: its messages round-trip, and the best of several runs is kept per figure."""

from __future__ import annotations

from bench.codec import _best, _cases


def test_every_benchmarked_message_round_trips_at_its_version() -> None:
    cases = _cases()
    assert len(cases) == 7
    for name, (msg, version) in cases.items():
        data = msg.encode(version)
        assert type(msg).decode(data, version) == msg, name


def test_the_best_of_the_runs_is_kept_for_each_figure() -> None:
    runs = [{"m": {"bytes": 10, "encode_ops_s": 5.2, "decode_ops_s": 9.0}},
            {"m": {"bytes": 10, "encode_ops_s": 7.6, "decode_ops_s": 3.0}}]
    assert _best(runs) == {"m": {"bytes": 10, "encode_ops_s": 8, "decode_ops_s": 9}}
