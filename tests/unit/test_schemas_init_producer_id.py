"""Byte-exact encodings of InitProducerId v6 (KIP-939: two-phase commit), worked out by hand from
Kafka's InitProducerIdRequest.json / InitProducerIdResponse.json: v6 appends Enable2Pc and
KeepPreparedTxn (bool, default false) to the request and OngoingTxnProducerId (int64, default
-1) and OngoingTxnProducerEpoch (int16, default -1) to the response, as ordinary (not tagged)
fields of a flexible version."""

from __future__ import annotations

from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_request_v6() -> None:
    msg = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=100, producer_id=123, producer_epoch=1,
                                enable_2pc=True, keep_prepared_txn=False)
    wire = _hex("03 7478"  # transactional_id: compact string "tx"
                "00000064"  # transaction_timeout_ms 100
                "000000000000007b"  # producer_id 123
                "0001"  # producer_epoch 1
                "01"  # enable_2pc
                "00"  # keep_prepared_txn
                "00")  # tagged fields: none
    assert msg.encode(6) == wire
    assert InitProducerIdRequest.decode(wire, 6) == msg
    keep = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=100, keep_prepared_txn=True)
    assert keep.encode(6)[-3:] == _hex("00 01 00")


def test_request_v5_has_no_2pc_fields() -> None:
    msg = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=100, producer_id=123, producer_epoch=1)
    assert msg.encode(5) == _hex("03 7478 00000064 000000000000007b 0001 00")
    assert msg.encode(6) == _hex("03 7478 00000064 000000000000007b 0001 00 00 00")


def test_response_v6() -> None:
    msg = InitProducerIdResponse(throttle_time_ms=100, error_code=0, producer_id=123, producer_epoch=1,
                                 ongoing_txn_producer_id=124, ongoing_txn_producer_epoch=2)
    wire = _hex("00000064"  # throttle_time_ms
                "0000"  # error_code
                "000000000000007b"  # producer_id 123
                "0001"  # producer_epoch 1
                "000000000000007c"  # ongoing_txn_producer_id 124
                "0002"  # ongoing_txn_producer_epoch 2
                "00")  # tagged fields
    assert msg.encode(6) == wire
    assert InitProducerIdResponse.decode(wire, 6) == msg
    # the defaults say "no ongoing transaction"
    plain = InitProducerIdResponse.decode(_hex("00000000 0000 000000000000007b 0001 00"), 5)
    assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)
