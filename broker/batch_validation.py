"""What a broker checks before it stores a producer's bytes (Kafka's LogValidator, for the part
that needs no record decoding): framing, CRC, size, and that a client writes no control batches
and no transactional batch outside a transactional request. Records are never decoded here."""

from __future__ import annotations

from protocol import batch as rb
from protocol.errors import ErrorCode, KafkaError


def validate_client_batches(records: bytes | bytearray | memoryview, max_message_bytes: int,
                            transactional: bool) -> int:
    """Raise KafkaError with the code Kafka answers; return the number of batches."""
    if not records:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
    n = 0
    for pos, h in rb.iter_batches(records, strict=True):
        n += 1
        size = h.size
        if size > max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes over max.message.bytes")
        rb.validate(records, pos, size, h)
        if h.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
        if h.is_transactional and not transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             "transactional batch in a produce request without a transactional id")
    return n
