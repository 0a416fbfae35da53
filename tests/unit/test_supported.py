"""The advertised table, the schemas and the handlers must agree, or a client gets a closed socket."""

from __future__ import annotations

from broker.apis import HANDLERS
from protocol.messages.registry import REQUESTS, RESPONSES
from protocol.supported import SUPPORTED


def test_every_advertised_api_has_a_handler_and_schemas_covering_its_range() -> None:
    for key, (lo, hi) in SUPPORTED.items():
        assert key in HANDLERS, f"api {key} advertised without a handler"
        for table in (REQUESTS, RESPONSES):
            vlo, vhi = table[key].VERSIONS
            assert vlo <= lo and hi <= vhi, f"api {key} advertised {lo}-{hi} but schema covers {vlo}-{vhi}"


def test_no_handler_is_left_unadvertised() -> None:
    assert set(HANDLERS) == set(SUPPORTED)


def test_ranges_cover_what_real_clients_need() -> None:
    # the lowest ranges serving kafka-python, aiokafka, librdkafka and kcat (shared/protocol-versions.md)
    need = {18: (0, 3), 3: (4, 4), 0: (3, 7), 1: (4, 11), 2: (2, 2), 22: (0, 0), 19: (2, 3), 20: (1, 1),
            32: (1, 1), 10: (1, 1)}
    for key, (lo, hi) in need.items():
        slo, shi = SUPPORTED[key]
        assert slo <= lo and hi <= shi, f"api {key}: clients need {lo}-{hi}, we advertise {slo}-{shi}"
