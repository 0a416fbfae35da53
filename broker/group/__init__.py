"""The consumer group coordinator: classic group protocol and committed offsets (docs/groups.md).

records.py   the key/value layouts of `__consumer_offsets`
model.py     groups, members, offsets and the result types
state.py     the sans-IO state machine: membership.py, offsets.py, loading.py over core.py
coordinator.py  the asyncio wrapper: parked requests, timers, log writes and loading
"""

from .coordinator import OFFSETS_TOPIC, GroupCoordinator

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator"]
