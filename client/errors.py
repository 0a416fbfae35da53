"""The client's exceptions: one hierarchy, Kafka error codes kept, retriable vs fatal made explicit.

Callers need to decide three things from an exception: may I retry it, must I abort the
transaction, or is this producer finished. Those are the three branches here, so a `try` can
catch `RetriableError`, `TransactionAbortableError` or `FatalError` without looking at codes.
"""

from __future__ import annotations

from protocol.errors import ErrorCode


class KafkaClientError(Exception):
    """Base of every error the bundled client raises; `code` is the Kafka error code if any."""

    code: ErrorCode | None = None

    def __init__(self, message: str = "", code: ErrorCode | int | None = None) -> None:
        if code is not None:
            self.code = ErrorCode(code)
        if self.code is not None and not message:
            message = self.code.name
        elif self.code is not None:
            message = f"{self.code.name}: {message}"
        super().__init__(message)


class RetriableError(KafkaClientError):
    """Trying again (after a metadata refresh or a backoff) may succeed."""


class ConnectionLostError(RetriableError):
    """The TCP connection failed or closed before the response arrived."""


class RequestTimedOutError(RetriableError):
    """No response within the request timeout; the connection is dropped because its order is lost."""


class NoBrokersAvailableError(RetriableError):
    """None of the bootstrap or known brokers accepted a connection."""


class UnsupportedVersionError(KafkaClientError):
    """The broker speaks no version of an API that this client also speaks."""


class BrokerResponseError(KafkaClientError):
    """A response carried a non-retriable error code."""


class RetriableBrokerError(BrokerResponseError, RetriableError):
    """A response carried an error code Kafka marks retriable."""


class TopicAlreadyExistsError(BrokerResponseError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicError(RetriableBrokerError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group already has `group.max.size` members, so the coordinator turned this one away.
    Fatal as in Java: joining again is refused the same way until a member leaves."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class CommitFailedError(KafkaClientError):
    """An offset commit was refused because the group rebalanced; the partitions may be someone else's."""


class KafkaTimeoutError(KafkaClientError):
    """An operation (delivery, metadata, transaction step) did not finish within its deadline."""


class IllegalStateError(KafkaClientError):
    """The call is not allowed in the object's current state (e.g. commit before begin)."""


class FatalError(KafkaClientError):
    """The producer cannot continue; close it. Any further transactional call raises this again."""


class ProducerFencedError(FatalError):
    """Another producer with the same transactional id has initialised since we did (a zombie)."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionAbortableError(KafkaClientError):
    """The current transaction failed but the producer is fine: call abort_transaction, then retry."""


class AuthenticationError(KafkaClientError):
    """The broker refused the login (SASL_AUTHENTICATION_FAILED, an unsupported mechanism), or a
    SCRAM broker could not prove it knows the credential: retrying with the same login cannot help."""


class ConsumerStoppedError(KafkaClientError):
    """The consumer was closed while a call was waiting on it."""


_SPECIFIC: dict[ErrorCode, type[KafkaClientError]] = {
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicError,
    ErrorCode.PRODUCER_FENCED: ProducerFencedError,
    ErrorCode.INVALID_PRODUCER_EPOCH: ProducerFencedError,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: ProducerFencedError,
    ErrorCode.GROUP_MAX_SIZE_REACHED: GroupMaxSizeReachedError,
    ErrorCode.SASL_AUTHENTICATION_FAILED: AuthenticationError,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: AuthenticationError,
    ErrorCode.ILLEGAL_SASL_STATE: AuthenticationError,
}


def error_from_code(code: int, message: str | None = None) -> KafkaClientError:
    """The exception for a response's error code, retriable or not as Kafka defines it."""
    ec = ErrorCode(code)
    cls = _SPECIFIC.get(ec)
    if cls is None:
        cls = RetriableBrokerError if ec.retriable else BrokerResponseError
    err = cls(message or "", ec)
    return err


def check(code: int, message: str | None = None) -> None:
    """Raise the exception for `code` unless it is NONE."""
    if code:
        raise error_from_code(code, message)


__all__ = [
    "AuthenticationError", "BrokerResponseError", "CommitFailedError", "ConnectionLostError", "ConsumerStoppedError", "FatalError",
    "GroupMaxSizeReachedError", "IllegalStateError", "KafkaClientError", "KafkaTimeoutError",
    "NoBrokersAvailableError", "ProducerFencedError", "RequestTimedOutError", "RetriableBrokerError",
    "RetriableError", "TopicAlreadyExistsError", "TransactionAbortableError", "UnknownTopicError",
    "UnsupportedVersionError", "check", "error_from_code",
]
