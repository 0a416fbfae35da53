"""Request handlers, one module per Kafka API (named after it), like franz-go's kfake.

Every handler is `async def handle(server, client, header, request) -> response | None`;
None means "send nothing" (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from . import (
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

Handler = Callable[[Any, Any, Any, Any], Coroutine[Any, Any, Any]]

HANDLERS: dict[int, Handler] = {
    m.KEY: m.handle
    for m in (produce, fetch, list_offsets, metadata, find_coordinator, api_versions, create_topics,
              delete_topics, init_producer_id, describe_configs)
}
