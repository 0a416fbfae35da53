"""InitProducerId (key 22): allot a producer id and epoch for idempotent or transactional producing.

v6 (KIP-939) carries two-phase commit: Enable2Pc asks that the id's transactions never be aborted
by their timeout (a prepared transaction waits for whoever decides its outcome), KeepPreparedTxn
asks that an ongoing transaction be kept rather than aborted, and the answer then names that
transaction's producer id and epoch (OngoingTxn*) next to the new instance's own.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, Message, f, schema

KEY = 22


@schema
class InitProducerIdRequest(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 2
    transactional_id: str | None = f(STRING)
    transaction_timeout_ms: int = f(INT32)
    producer_id: int = f(INT64, "3+", default=-1)
    producer_epoch: int = f(INT16, "3+", default=-1)
    enable_2pc: bool = f(BOOL, "6+", default=False)
    keep_prepared_txn: bool = f(BOOL, "6+", default=False)


@schema
class InitProducerIdResponse(Message):
    API_KEY = KEY
    VERSIONS = (0, 6)
    FLEXIBLE = 2
    throttle_time_ms: int = f(INT32)
    error_code: int = f(INT16)
    producer_id: int = f(INT64, default=-1)
    producer_epoch: int = f(INT16)
    ongoing_txn_producer_id: int = f(INT64, "6+", default=-1)
    ongoing_txn_producer_epoch: int = f(INT16, "6+", default=-1)
