"""What a request handler may touch: the narrow, typed contexts handlers receive.

Handlers used to get the whole BrokerServer, so nothing said what a handler depends on and every
handler module imported the server (an import cycle). A client-listener handler now gets a
BrokerContext — the broker's identity and settings, its clock, the topics (metadata and the local
partitions), the two coordinators, the producer-id allocator and the metrics — and a
controller-listener handler a ControllerContext: the metadata quorum and the controller that
decides when it leads. Each gets the ClientInfo of the connection the request came on. Nothing
here knows about sockets; the broker (broker/server.py) builds one context per listener at start
and the connection layer (broker/connection.py) passes it to every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.clock import Clock
from protocol.headers import RequestHeader
from protocol.schema import Message

from .fetch_session import FetchSessionCache
from .security.authorizer import Authorizer

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .controller.client import ControllerClient
    from .controller.quorum_controller import QuorumController
    from .controller.shell import ControllerShell
    from .forwarding import ControllerForwarder
    from .group.coordinator import GroupCoordinator
    from .metrics import BrokerMetrics
    from .producer_ids import ProducerIdAllocator
    from .propagation import Propagation
    from .quorum.shell import QuorumShell
    from .replication.manager import ReplicaManager
    from .share.coordinator import ShareCoordinator
    from .share.manager import SharePartitions
    from .topics import TopicTable
    from .txn.coordinator import TransactionCoordinator


@dataclass(slots=True)
class ClientInfo:
    """The connection a request arrived on. `endpoint` is the advertised address of the listener
    it came in on: Metadata and FindCoordinator answer with that listener's addresses, as Kafka
    does, so a client that came in on the inter-broker listener stays on it. `inter_broker` is
    what lets WriteTxnMarkers, replica fetches and the other broker-to-broker requests through: set
    on the inter-broker listener, for anyone when it is PLAINTEXT, for the `super_users` when it is
    secured (broker/security/session.py)."""

    conn_id: int
    peer: str
    endpoint: tuple[str, int]
    inter_broker: bool = False
    client_id: str | None = None
    # Who is asking, in Kafka's "User:<name>" form: set by authentication (SASL or a client
    # certificate) and read by the authorizer. ANONYMOUS until a listener authenticates.
    principal: str = "User:ANONYMOUS"
    # The name of the listener the connection came in on (PLAINTEXT, SSL, BROKER, ...): Metadata
    # answers with every broker's address on the listener of that name. "": unnamed (tests).
    listener: str = ""
    # Done once the latest produce request of this connection has appended: the next one appends
    # only after it (broker/apis/produce.py), whatever either waited for before appending.
    produce_appended: asyncio.Future[None] | None = None


@dataclass(frozen=True, slots=True)
class BrokerContext:
    node_id: int
    config: BrokerConfig
    clock: Clock
    topics: TopicTable
    groups: GroupCoordinator
    txn: TransactionCoordinator
    producer_ids: ProducerIdAllocator
    metrics: BrokerMetrics
    quorum: QuorumShell | None = None  # the metadata quorum (broker/quorum/shell.py)
    replication: ReplicaManager | None = None  # followers' fetchers, leaders' ISR changes
    controller_client: ControllerClient | None = None  # asks the active controller, wherever it is
    propagation: Propagation | None = None  # waits until every live broker has a topic change
    forwarder: ControllerForwarder | None = None  # admin requests Kafka forwards to the controller
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)  # KIP-227 (apis/fetch.py)
    broker_epoch: Callable[[], int | None] = lambda: None  # this broker's registration, once it has one
    authorizer: Authorizer = field(default_factory=Authorizer)  # who may do what (off: everyone everything)
    shares: SharePartitions | None = None  # KIP-932 share-partitions this broker leads (broker/share)
    share_coordinator: ShareCoordinator | None = None  # their durable state, in __share_group_state


@dataclass(frozen=True, slots=True)
class ControllerContext:
    node_id: int
    config: BrokerConfig
    clock: Clock
    topics: TopicTable  # checks topic configs; its image answers ListPartitionReassignments
    quorum: QuorumShell
    controller: QuorumController  # decides when this node's quorum leads
    shell: ControllerShell  # runs and commits its decisions


# `async def handle(ctx, client, header, request) -> response | None`; None: send nothing (acks=0).
Handler = Callable[[BrokerContext, ClientInfo, RequestHeader, Any], Coroutine[Any, Any, Message | None]]
ControllerHandler = Callable[[ControllerContext, ClientInfo, RequestHeader, Any], Coroutine[Any, Any, Message | None]]
