"""Issue 23 item 5: a quorum leader's lease (broker/quorum/lease.py) and the voters' promise
behind it. A leader counts a voter towards its lease only from entries the voter proved it
received; a voter that took a leader's entries, or that has just restarted, grants no vote for a
fetch timeout. The seeded simulation (tests/sim) checks under faults that no leader's lease holds
once a later epoch has a leader."""

from __future__ import annotations

from test_quorum_node import CFG, Net

from broker.quorum.lease import lease_holds
from broker.quorum.messages import Entry, VoteRequest, VoteResponse
from broker.quorum.node import Persisted, QuorumNode, Role


def _answer(node: QuorumNode) -> VoteResponse:
    ready = node.ready()
    node.advance(ready)  # one Ready at a time: the next is taken only after this
    [(_, resp)] = [m for m in ready.messages if isinstance(m[1], VoteResponse)]
    assert isinstance(resp, VoteResponse)
    return resp


def test_a_voter_that_took_the_leaders_entries_refuses_a_real_vote_for_a_fetch_timeout() -> None:
    # A candidate that won its pre-votes elsewhere (or long ago) must not win this voter's real
    # vote while the voter's promise to the leader stands: the leader's lease counts on it.
    net = Net()
    net.ticks(20)
    leader = net.leader()
    follower, other = (n for n in net.nodes.values() if n is not leader)
    leader.propose(b"x")
    net.flush()
    assert leader.lease_confirmations()[follower.id] == leader.log_end - 1
    epoch = follower.epoch
    follower.receive(other.id, VoteRequest(epoch + 1, other.id, follower.log_end - 1, follower.last_epoch,
                                           pre_vote=False))
    resp = _answer(follower)
    assert not resp.granted
    assert follower.epoch == epoch and follower.role == Role.FOLLOWER  # refused without moving on


def test_a_restarted_voter_grants_no_vote_until_a_fetch_timeout_has_passed() -> None:
    # It may have promised a leader just before it died: the restart must not cut the promise short.
    log = (Entry(0, 2, b""), Entry(1, 2, b"a"))
    n = QuorumNode(2, frozenset({1, 2, 3}), Persisted(2, 1, None, log), CFG)
    n.receive(3, VoteRequest(3, 3, 1, 2, pre_vote=True))
    assert not _answer(n).granted
    for _ in range(CFG.fetch_timeout_ticks):
        n.tick()
    n.advance(n.ready())
    n.receive(3, VoteRequest(3, 3, 1, 2, pre_vote=True))
    assert _answer(n).granted


def test_a_new_cluster_elects_at_once() -> None:
    # Nobody can have promised anything before the first epoch: no wait at a first start.
    n = QuorumNode(2, frozenset({1, 2, 3}), Persisted(), CFG)
    n.receive(3, VoteRequest(1, 3, -1, -1, pre_vote=True))
    assert _answer(n).granted


def test_the_lease_counts_confirmed_entries_within_the_window() -> None:
    voters = {1, 2, 3}
    assert lease_holds(10.0, 2.0, 1, voters, {2: 8.5, 3: None})
    assert not lease_holds(10.0, 2.0, 1, voters, {2: 8.0, 3: 7.0})  # strictly inside the window
    assert not lease_holds(10.0, 2.0, 1, voters, {2: None, 3: None})
    assert not lease_holds(10.0, 2.0, 1, {1, 2, 3, 4, 5}, {2: 9.9})  # 2 of 5 is no majority
    assert lease_holds(10.0, 2.0, 1, {1}, {})  # a single voter leads alone


def test_a_leader_counts_no_entry_of_an_earlier_epoch() -> None:
    # Entries a voter holds from an older epoch prove nothing about this leadership.
    net = Net()
    net.ticks(20)
    leader = net.leader()
    assert set(leader.lease_confirmations()) == {n.id for n in net.nodes.values() if n is not leader}
    assert all(o >= leader.epoch_start_offset for o in leader.lease_confirmations().values())
    follower = next(n for n in net.nodes.values() if n is not leader)
    assert follower.lease_confirmations() == {}
