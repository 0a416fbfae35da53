"""EndTxn (26): commit or abort the producer's transaction.

The answer comes once PrepareCommit/PrepareAbort is durable in `__transaction_state`; the markers
follow in the background (the seeds' two-phase commit with an early reply: after the prepare
record the outcome can no longer change, and a restarted coordinator finishes it).

v5 (KIP-890 part 2) bumps the producer epoch at each transaction end and returns it, so that a
late EndTxn of an earlier transaction carries a stale epoch and is refused instead of ending the
transaction that follows.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse

from ..context import BrokerContext, ClientInfo
from ..txn.wire_errors import for_version

KEY = 26
ORDERED = True  # runs alone on its connection, in request order (broker/connection.py)
EPOCH_BUMP_FROM = 5


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader, req: EndTxnRequest) -> EndTxnResponse:
    v = header.api_version
    d = await ctx.txn.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
                                 bump_epoch=v >= EPOCH_BUMP_FROM)
    if d.error:
        return EndTxnResponse(throttle_time_ms=0, error_code=for_version(d.error, KEY, v))
    return EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=d.producer_id, producer_epoch=d.producer_epoch)
