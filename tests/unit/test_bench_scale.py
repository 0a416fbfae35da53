"""bench/scale.py's reading of the broker's /metrics text (the only pure logic of that benchmark)."""

from bench.scale import parse_metrics


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
