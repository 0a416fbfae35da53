"""bench/scale.py's reading of the broker's /metrics text (the only pure logic of that benchmark)."""

from bench.scale import parse_metrics, recovery_summary


def test_parse_metrics_reads_samples_and_skips_comments() -> None:
    text = (
        "# HELP ketch_quorum_leader Node id\n"
        "# TYPE ketch_quorum_leader gauge\n"
        "ketch_quorum_leader 2\n"
        'ketch_brokers{state="unfenced"} 3\n'
        "ketch_quorum_high_watermark 1.5e3\n"
        "garbage line\n"
    )
    assert parse_metrics(text) == {
        "ketch_quorum_leader": 2.0,
        'ketch_brokers{state="unfenced"}': 3.0,
        "ketch_quorum_high_watermark": 1500.0,
    }


def test_recovery_summary_adds_up_the_recovered_lines_of_one_start() -> None:
    text = (
        '{"directory": "/d/t-0", "recovery_point": 0, "log_end_offset": 40, "batches_validated": 3, '
        '"event": "partition log recovered"}\n'
        '{"event": "listening"}\n'
        '{"directory": "/d/t-1", "recovery_point": 40, "log_end_offset": 40, "batches_validated": 0, '
        '"event": "partition log recovered"}\n'
        'not json "partition log recovered"\n'
    )
    assert recovery_summary(text) == {
        "batches_validated": 3,
        "recovery_point_and_log_end": {"t-0": [0, 40], "t-1": [40, 40]},
    }
