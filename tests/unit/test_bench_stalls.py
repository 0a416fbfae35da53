"""bench.stalls reads the loop watch's counters from a broker's /metrics text."""

from __future__ import annotations

from bench.stalls import STALL_METRICS, samples

EXPOSITION = """\
# HELP ketch_event_loop_stalls_total Times the event loop did not turn for a second or more.
# TYPE ketch_event_loop_stalls_total counter
ketch_event_loop_stalls_total 1
ketch_event_loop_stall_seconds_total 1.5
ketch_event_loop_stalls_100ms_total 4
ketch_event_loop_stall_100ms_seconds_total 2.25
ketch_requests_total{api="Produce"} 7
"""


def test_the_stall_counters_are_read_and_labelled_samples_left_out() -> None:
    read = samples(EXPOSITION)
    assert {key: read.get(name) for key, name in STALL_METRICS.items()} == {
        "stalls_1s": 1, "stall_1s_seconds": 1.5, "stalls_100ms": 4, "stall_100ms_seconds": 2.25}
    assert not [name for name in read if name.startswith("ketch_requests_total")]
