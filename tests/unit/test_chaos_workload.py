"""The chaos workload's client settings that decide what a campaign can judge."""

from __future__ import annotations

from helpers.chaos.workload import IDEMPOTENT_SETTINGS


def test_plain_idempotent_producers_keep_one_request_in_flight() -> None:
    """Seed 2612 stored one plain send twice: librdkafka bumped the producer epoch on an
    OUT_OF_ORDER_SEQUENCE_NUMBER for a request queued behind a failed one (librdkafka#4953) and
    re-sent, under the new epoch, another partition's batch that the new leader already held. With
    one request in flight a connection never queues a request behind a failed one, which leaves
    such bumps rare (docs/chaos.md, seed 2613), so a value stored twice is the broker's doing
    again, as the checker counts it."""
    assert IDEMPOTENT_SETTINGS["max.in.flight.requests.per.connection"] == 1
    assert IDEMPOTENT_SETTINGS["enable.idempotence"] is True and IDEMPOTENT_SETTINGS["acks"] == "all"
