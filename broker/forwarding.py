"""Admin requests that Kafka's brokers forward to the active controller, sent on as they came.

An admin client cannot know which broker leads the metadata quorum, so Kafka's brokers forward
what only the controller can answer (DescribeQuorum among them) and pass its answer back. Ketch
forwards the request unchanged, in the client's version, to the controller listener of the quorum
leader, over a connection of its own (wire.Channel), wrapping the handler that answers when this
node leads (broker/apis/__init__.py, to_controller). ListPartitionReassignments is thus answered
from the quorum leader's image, not this broker's: a broker whose image lags (a slow fetch of the
metadata log) would list a reassignment as still running, or miss one just started. The topic
changes the controller decides go through the ControllerClient instead (broker/controller/client.py):
those wait for this broker's image afterwards. docs/protocol.md lists what is forwarded and how.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.schema import Message

from .wire import Channel, WireSecurity

if TYPE_CHECKING:
    from .quorum.shell import QuorumShell

FORWARD_TIMEOUT_S = 15.0


class ControllerForwarder:
    def __init__(self, node_id: int, quorum: QuorumShell | None, security: WireSecurity | None = None) -> None:
        self._node_id = node_id
        self._quorum = quorum
        self._channel = Channel(self._address, f"ketch-forward-{node_id}", security)

    def _address(self, node: int) -> tuple[str, int] | None:
        return None if self._quorum is None else self._quorum.voters.get(node)

    def leader_elsewhere(self) -> int | None:
        """The quorum leader when it is another node; None when this node leads or none is known
        (the request is then answered here)."""
        if self._quorum is None or self._quorum.node is None:
            return None
        leader = self._quorum.status()[0]
        return leader if leader >= 0 and leader != self._node_id else None

    async def forward(self, node: int, request: Message, version: int) -> Any:
        conn = await self._channel.connection(node)
        return await conn.request(request, version=version, timeout=FORWARD_TIMEOUT_S)

    def close(self) -> None:
        self._channel.close()
