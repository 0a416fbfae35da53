"""The transaction coordinator (docs/transactions.md), split the sans-IO way.

Pure logic, fed events with an explicit now_ms and returning what to do:
    state.py         states, per-transactional-id metadata, which transitions are legal
    log_records.py   the binary layout of `__transaction_state` keys and values
    machine.py       the coordinator's decisions (InitProducerId, AddPartitions, EndTxn, timeouts...)
    markers.py       the marker sender's bookkeeping: what is owed to which broker, what is done
    partitioning.py  which `__transaction_state` / `__consumer_offsets` partition owns a key

The asyncio shells around them:
    coordinator.py   log appends, recovery from the log, waiting requests, the reaper loop
    sender.py        WriteTxnMarkers over TCP to each partition leader, batched per broker

Its test-only crash points (KETCH_TEST_CRASH_AT) are in storage/faults.py, with the break switches.
"""
