"""The group APIs are advertised over at least what the clients need (shared/protocol-versions.md)."""

from __future__ import annotations

from broker.apis import HANDLERS
from protocol.supported import SUPPORTED

# api key: the lowest range serving kafka-python, aiokafka, librdkafka and kcat, and what they send
NEEDED = {11: (0, 7), 14: (0, 5), 12: (0, 4), 13: (0, 5), 8: (0, 8), 9: (0, 8), 15: (0, 5), 16: (0, 4), 42: (0, 2)}


def test_group_api_ranges_cover_the_clients() -> None:
    for key, (lo, hi) in NEEDED.items():
        assert key in HANDLERS, f"api {key} has no handler"
        slo, shi = SUPPORTED[key]
        assert slo <= lo and hi <= shi, f"api {key}: need {lo}-{hi}, advertise {slo}-{shi}"
