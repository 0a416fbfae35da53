"""The answer to a request a peer may not make (CLUSTER_AUTHORIZATION_FAILED), for any API whose
response carries a top-level error code — as Kafka's getErrorResponse answers a request it
refuses without looking inside."""

from __future__ import annotations

import dataclasses

from protocol.errors import ErrorCode
from protocol.messages.registry import RESPONSES
from protocol.schema import Message


def refusal(api_key: int, version: int, code: int = ErrorCode.CLUSTER_AUTHORIZATION_FAILED) -> Message | None:
    """The response with `code` as its error; None when the response has no top-level error code
    at this version (the connection is then closed instead)."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        return None
    for fl in dataclasses.fields(cls):  # type: ignore[arg-type]
        if fl.name == "error_code":
            rng = fl.metadata.get("versions")
            if rng is not None and rng[0] <= version <= rng[1] and fl.metadata.get("tag") is None:
                return cls(error_code=code)  # type: ignore[call-arg]
    return None
