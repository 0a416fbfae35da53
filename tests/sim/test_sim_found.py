"""Seeds of the whole-cluster simulation (tests/helpers/dst) that found a bug, run as regressions
(docs/simulation.md, "Found by it"). A seed replays the run that found the bug only under
PYTHONHASHSEED=0 (set iteration order is part of a run), as `make test` runs pytest; under
another hash seed it is another run, which must pass all the same."""

from __future__ import annotations

from tests.helpers.dst.run import simulate

REPLAY = "PYTHONPATH=. python -m tests.helpers.dst --seed {seed} --seconds {seconds:.0f} --trace"
# The faults a seed found before `flip` and `app-pause` (2026-11-27) was drawn from: the same seed
# replays its run.
BEFORE_FLIP = ("kill", "power-loss", "pause", "isolate", "one-way", "bridge", "clock", "slow-disk", "strand", "rack",
               "takeover", "rejoin")
REPLAY_BEFORE_FLIP = REPLAY + " --faults " + ",".join(BEFORE_FLIP)
# ... and before `reap-flip` (later the same day).
BEFORE_REAP_FLIP = (*BEFORE_FLIP, "flip", "app-pause")
REPLAY_BEFORE_REAP_FLIP = REPLAY + " --faults " + ",".join(BEFORE_REAP_FLIP)


def test_seed_314_every_broker_back_from_an_unclean_shutdown_the_longest_log_leads() -> None:
    """Broker 2 loses power (its logs lose their unflushed tails), 1 and 3 are killed, and all
    three register again on a new controller: 1 and 3 left every ISR to 2, still registered from
    before, and 2, back too, led again as the last known leader; 1 and 3 truncated their logs to
    its torn ones (mixed-1 from 608 to 245, and most other partitions), losing 232 acknowledged
    writes. Now such a partition waits for every candidate and the longest log leads
    (broker/controller/recovery.py)."""
    result = simulate(314, 30)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=314, seconds=30)


def test_seed_1201_two_voters_told_of_a_resigned_leader_still_elect_one() -> None:
    """After a partition heals, the old quorum leader has resigned (prospective, its log the
    longest) and the two others, refused pre-votes by a majority, follow the leader a peer named;
    each then refused the others' pre-votes as if that leader were alive, and no election started
    for the remaining 154 s of the run: the copier never finished. A pre-vote is now refused only
    for a leader heard from itself (broker/quorum/node.py; tests/unit/test_quorum_node.py::
    test_a_leader_only_heard_of_does_not_refuse_pre_votes)."""
    result = simulate(1201, 30)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=1201, seconds=30)


def test_seed_2700_a_commit_that_timed_out_does_not_kill_its_application() -> None:
    """A transactional worker's `wait_for(commit_transaction(), 30)` timed out during a
    coordinator takeover; the cancelled commit's `gather` cancelled the in-flight batches'
    futures, and the next `close` (or flush, or commit) raised CancelledError, which ended the
    worker as if someone had cancelled it -- the harness then did not count a cancelled worker
    as dead, so one seed in ten ran part of its workload dead. The client now waits with
    asyncio.wait (client/producer.py `_settled`;
    tests/integration/test_client_failures.py::test_a_commit_the_caller_stopped_waiting_for_can_be_committed_again)."""
    result = simulate(2700, 30)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=2700, seconds=30)


def test_seed_3501_a_request_woken_by_an_unload_is_sent_to_the_new_coordinator() -> None:
    """A transaction coordinator back from a 15 s stall (`takeover`) found two of its partitions
    led elsewhere; unloading them woke an AddPartitionsToTxn that waited for the id's previous
    transaction to complete, which then decided on the emptied state and answered
    INVALID_PRODUCER_ID_MAPPING: fatal for the client, whose producer died. It is told
    NOT_COORDINATOR now (broker/txn/coordinator.py `_begin_decision`; tests/unit/
    test_coordinator_loading.py::test_a_request_waiting_on_a_transition_is_sent_elsewhere_when_the_partition_goes)."""
    result = simulate(3501, 60, faults=BEFORE_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_FLIP.format(seed=3501, seconds=60)


def test_seed_3507_a_verification_answered_by_a_broker_without_metadata_is_retried() -> None:
    """A partition leader asked the transaction coordinator its metadata named -- a broker just
    restarted, with no metadata yet -- whether a partition was in the producer's transaction; it
    answered UNKNOWN_TOPIC_OR_PARTITION, and the leader told the producer INVALID_TXN_STATE for
    every code it did not expect: fatal for the client. Codes other than the ones Kafka maps now
    reach the producer as they are (retriable here), as in Kafka's AddPartitionsToTxnManager, and
    a coordinator answers a verification by whether it serves the id, not by its view of the
    topics (tests/unit/test_produce_verdicts.py)."""
    result = simulate(3507, 60, faults=BEFORE_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_FLIP.format(seed=3507, seconds=60)


def test_seed_3532_a_stale_coordinators_refusal_of_a_produce_leaves_the_producer_alive() -> None:
    """A broker back from a 22 s stall, still believing it coordinated `sim-t1` and led `mixed-1`,
    checked a produce against its old state (the transaction long complete) and refused it
    INVALID_TXN_STATE; the client took that for fatal and the application died. A failed batch
    is fatal only for what Java's producer treats so; this one makes the transaction abortable
    (client/transactions.py `_PRODUCE_FATAL`; tests/unit/test_client_txn_state_machine.py)."""
    result = simulate(3532, 60, faults=BEFORE_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_FLIP.format(seed=3532, seconds=60)


def test_seed_3975_a_stale_coordinators_refusal_of_an_offset_commit_is_abortable() -> None:
    """Seed 3532's family on the group's side: broker 1, back from a 15 s stall, still believing
    it coordinated `sim-copier` (its state: CompleteCommit) and led `__consumer_offsets-1`,
    checked the copier's TxnOffsetCommit against that old state and refused it INVALID_TXN_STATE,
    which is fatal for a TxnOffsetCommit (Java's producer too): the copier died. The coordinator
    now answers TRANSACTION_ABORTABLE, as Kafka's does, and clients that know it (TxnOffsetCommit
    v4, Produce v11; KIP-1050) are told so and abort (broker/txn/wire_errors.py;
    tests/integration/test_txn_protocol.py)."""
    result = simulate(3975, 120, faults=BEFORE_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_FLIP.format(seed=3975, seconds=120)


def test_seed_4292_a_stale_brokers_metadata_does_not_send_a_consumer_back_to_offset_0() -> None:
    """Broker 3, back from a 19.5 s stall during which the two others were killed, answered
    Metadata from its old view: itself leading `mixed-0` at epoch 2, where the consumers knew
    broker 1 at epoch 3. They took it, fetched from broker 3's shorter log, got
    OFFSET_OUT_OF_RANGE and reset to the earliest offset: both read the partition again from 0
    (`nonmonotonic-poll`). The client now keeps a partition's newer leader epoch against an
    older one, as Java's Metadata does (client/cluster.py; tests/unit/test_client_metadata_epochs.py)."""
    result = simulate(4292, 120, faults=BEFORE_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_FLIP.format(seed=4292, seconds=120)


def test_seed_20_a_late_answer_to_a_previous_load_s_markers_does_not_abandon_the_reload_s() -> None:
    """`__transaction_state` moved away and back (`flip`) while a WriteTxnMarkers of the earlier
    coordinator epoch was held on a cut link; the reload owed the same markers under its own
    epoch, and the held request's answer (TRANSACTION_COORDINATOR_FENCED: the partition had seen
    the epoch in between) abandoned the reload's job: `sim-t2` stayed PrepareAbort for good. An
    answer now applies only to the job of the epoch that sent it (broker/txn/markers.py;
    tests/unit/test_txn_records.py::test_a_late_answer_to_a_previous_load_s_markers_leaves_the_reloaded_job_alone)."""
    result = simulate(20, 30, faults=("flip",))
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=20, seconds=30) + " --faults flip"


def test_seed_4694_an_abort_of_a_transaction_that_added_nothing_is_not_refused() -> None:
    """A transactional application aborted after a produce its coordinator never added; broker 3,
    its previous coordinator (not yet aware of the move), held the id CompleteAbort at the
    client's epoch and refused the EndTxn v5 abort INVALID_TXN_STATE, fatal for the client. As
    Kafka's transaction version 2, such an abort is now taken under the next epoch with nothing
    to mark (broker/txn/machine.py `end_txn`; tests/unit/test_txn_machine.py::
    test_an_epoch_bump_abort_of_a_transaction_that_added_nothing_bumps_the_epoch)."""
    result = simulate(4694, 120, faults=BEFORE_REAP_FLIP)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY_BEFORE_REAP_FLIP.format(seed=4694, seconds=120)


def test_seed_5430_a_follower_that_stated_no_broker_epoch_is_not_asked_into_the_isr() -> None:
    """`rejoin`: broker 3, restarted and not yet registered, fetched `__consumer_offsets-1` without
    a broker epoch and caught up; its leader asked to add it naming -1, which the controller
    cannot check (KIP-903). The request, held on a cut link, arrived after that incarnation had
    lost power (log torn at 822, the high watermark 835) and registered again: 3 joined the ISR,
    later led, and served the copier's committed offsets from before. A follower is now asked
    into the ISR only once its fetches state its registration (broker/partition/replica_state.py;
    tests/unit/test_replica_state.py::test_a_follower_whose_fetches_state_no_broker_epoch_is_not_asked_into_the_isr)."""
    result = simulate(5430, 120)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=5430, seconds=120)


def test_seed_5424_a_zombie_coordinator_is_judged_against_the_leader_epochs_of_the_same_check() -> None:
    """The harness: node 1 became the copier group's coordinator at leader epoch 1 in the same
    check that still saw node 3, the zombie of epoch 0, serving older offsets; the copier-offsets
    invariant judged node 3 before that check had taken in epoch 1, and failed a correct run. It
    now runs once the check knows every leader epoch it sees (tests/helpers/dst/invariants.py)."""
    result = simulate(5424, 120)
    assert result.ok, result.summary() + "\nreplay: " + REPLAY.format(seed=5424, seconds=120)
