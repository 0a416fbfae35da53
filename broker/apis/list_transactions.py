"""ListTransactions (66): the transactional ids this coordinator knows, with Kafka's filters.

Filters combine with AND: state names, producer ids, and (v1) a minimum running time of the
current transaction. Unknown state names are echoed back in `unknown_state_filters`, which is how
the admin client reports a typo instead of an empty list.
"""

from __future__ import annotations

from protocol.headers import RequestHeader
from protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)

from ..context import BrokerContext, ClientInfo
from ..txn.state import TxnState

KEY = 66
ORDERED = False


async def handle(ctx: BrokerContext, client: ClientInfo, header: RequestHeader,
                 req: ListTransactionsRequest) -> ListTransactionsResponse:
    coord = ctx.txn
    unknown = [s for s in req.state_filters if TxnState.from_wire_name(s) is None]
    states = {s for s in req.state_filters if TxnState.from_wire_name(s) is not None}
    pids = set(req.producer_id_filters)
    min_duration = req.duration_filter if header.api_version >= 1 else -1
    now = ctx.clock.now_ms()
    out = []
    for meta in sorted(coord.all(), key=lambda m: m.transactional_id):
        state = coord.visible_state(meta).wire_name
        if req.state_filters and state not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if min_duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration):
            continue
        out.append(TransactionState(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                                    transaction_state=state))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                    transaction_states=out)
