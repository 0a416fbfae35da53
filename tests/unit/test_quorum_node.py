"""The quorum core's rules one scenario at a time (the seeded simulation in tests/sim/ covers
them under faults): election, pre-vote keeping a returning node from deposing a healthy leader,
truncation of a diverging log, catch-up from a snapshot, and what stale or foreign senders get."""

from __future__ import annotations

import random

from broker.quorum.messages import Entry, FetchRequest, Message, VoteRequest, VoteResponse
from broker.quorum.node import Persisted, QuorumConfig, QuorumNode, Role

CFG = QuorumConfig(election_timeout_ticks=5, fetch_timeout_ticks=8)


class Net:
    """Every node processes its Ready right away; messages go FIFO; `cut` nodes hear nothing."""

    def __init__(self, persisted: dict[int, Persisted] | None = None, voters: int = 3) -> None:
        ids = frozenset(range(1, voters + 1))
        self.nodes = {i: QuorumNode(i, ids, (persisted or {}).get(i, Persisted()), CFG, random.Random(i))
                      for i in sorted(ids)}
        self.queue: list[tuple[int, int, Message]] = []
        self.cut: set[int] = set()
        self.applied: dict[int, list[bytes]] = {i: [] for i in ids}

    def flush(self) -> None:
        for _ in range(10_000):
            progressed = False
            for i, n in self.nodes.items():
                if n.has_ready():
                    r = n.ready()
                    self.queue += [(i, dst, m) for dst, m in r.messages]
                    if r.restore is not None:
                        self.applied[i] = [r.restore.data]
                    self.applied[i] += [e.data for e in r.committed if e.data]
                    n.advance(r)
                    progressed = True
            if self.queue:
                src, dst, m = self.queue.pop(0)
                if src not in self.cut and dst not in self.cut:
                    self.nodes[dst].receive(src, m)
                progressed = True
            if not progressed:
                return

    def ticks(self, n: int) -> None:
        for _ in range(n):
            for node in self.nodes.values():
                node.tick()
            self.flush()

    def leader(self) -> QuorumNode:
        leaders = [n for n in self.nodes.values() if n.role == Role.LEADER]
        assert len(leaders) == 1, [(n.id, n.role, n.epoch) for n in self.nodes.values()]
        return leaders[0]


def test_a_single_voter_leads_at_once_and_commits_what_it_persisted() -> None:
    n = QuorumNode(1, frozenset({1}), Persisted(), CFG)
    assert n.role == Role.LEADER and n.epoch == 1
    assert n.propose(b"a") == 1
    assert n.high_watermark == 0  # nothing is committed before it is on disk
    r = n.ready()
    assert r.hard_state == (1, 1) and [e.data for e in r.entries] == [b"", b"a"]
    n.advance(r)
    assert n.high_watermark == 2 and [e.data for e in n.ready().committed] == [b"", b"a"]


def test_three_nodes_elect_one_leader_and_replicate() -> None:
    net = Net()
    net.ticks(20)
    leader = net.leader()
    for i in range(5):
        leader.propose(b"x%d" % i)
    net.ticks(3)
    assert all(net.applied[i] == [b"x%d" % k for k in range(5)] for i in net.nodes)


def test_pre_vote_keeps_a_returning_node_from_deposing_the_leader() -> None:
    net = Net()
    net.ticks(20)
    leader, epoch = net.leader(), net.leader().epoch
    lonely = next(i for i in net.nodes if i != leader.id)
    net.cut = {lonely}
    net.ticks(60)  # it times out again and again, asking for pre-votes nobody hears
    assert net.nodes[lonely].epoch == epoch  # a pre-vote never bumps the epoch
    net.cut = set()
    net.ticks(10)
    assert net.leader() is leader and leader.epoch == epoch
    assert net.nodes[lonely].role == Role.FOLLOWER and net.nodes[lonely].leader == leader.id


def test_a_voter_back_while_another_stalls_follows_the_leader_that_refused_it() -> None:
    """A voter restarted while a second one is stalled asks for pre-votes; only the leader
    answers, refusing and naming itself. The leader's own word is enough to follow it (KRaft
    follows the leader any response names): waiting for a majority of refusals meant following
    nobody, the leader heard from no majority, and check-quorum deposed it a few seconds later --
    an election and every broker's session lost for each restart next to a stalled voter (the
    simulation's `strand` runs, docs/simulation.md)."""
    net = Net()
    net.ticks(20)
    leader, epoch = net.leader(), net.leader().epoch
    stalled, back = (i for i in sorted(net.nodes) if i != leader.id)
    net.cut = {stalled, back}
    net.ticks(CFG.fetch_timeout_ticks // 2)  # `back` is down a while: the leader hears neither
    old = net.nodes[back]
    net.nodes[back] = QuorumNode(back, old.voters, Persisted(old.epoch, old.voted_for), CFG, random.Random(back + 10))
    net.queue = [(s, d, m) for s, d, m in net.queue if back not in (s, d)]  # its connections died with it
    net.cut = {stalled}
    net.ticks(60)
    assert net.leader() is leader and leader.epoch == epoch
    assert net.nodes[back].role == Role.FOLLOWER and net.nodes[back].leader == leader.id


def test_a_leader_writing_slowly_answers_a_pre_vote_at_once() -> None:
    """The refusal that names the leader changes nothing, so it does not wait behind the Ready
    being written (a slow metadata disk: the `strand` fence runs of the simulation)."""
    net = Net()
    net.ticks(20)
    leader = net.leader()
    leader.propose(b"slow")
    writing = leader.ready()  # taken, not yet durable
    assert not leader.has_ready()
    voter = next(i for i in net.nodes if i != leader.id)
    leader.receive(voter, VoteRequest(leader.epoch + 1, voter, leader.log_end - 1, leader.epoch, pre_vote=True))
    assert leader.free_messages() == [(voter, VoteResponse(leader.epoch, False, True, leader.id))]
    leader.advance(writing)


def test_a_follower_truncates_its_diverging_tail_and_takes_the_leaders() -> None:
    # Node 3 wrote entries 2-3 in epoch 1 as a leader that never got them committed; nodes 1 and
    # 2 moved on in epoch 2. The leader of epoch 3 must make node 3 drop them.
    common = (Entry(0, 1, b""), Entry(1, 1, b"a"))
    net = Net({1: Persisted(2, None, None, common + (Entry(2, 2, b""), Entry(3, 2, b"b"))),
               2: Persisted(2, None, None, common + (Entry(2, 2, b""), Entry(3, 2, b"b"))),
               3: Persisted(1, 3, None, common + (Entry(2, 1, b"lost"), Entry(3, 1, b"lost2"), Entry(4, 1, b"x")))})
    net.ticks(30)
    leader = net.leader()
    assert leader.id in (1, 2)  # node 3's log is behind in epochs: it cannot win
    assert [e.data for e in net.nodes[3].log] == [e.data for e in leader.log]
    assert b"lost" not in net.applied[3] and net.applied[3][:2] == [b"a", b"b"]


def test_a_follower_behind_the_log_start_catches_up_from_the_snapshot() -> None:
    net = Net()
    net.ticks(20)
    leader = net.leader()
    behind = next(i for i in net.nodes if i != leader.id)
    net.cut = {behind}
    for i in range(10):
        leader.propose(b"p%d" % i)
    net.ticks(2)
    leader.take_snapshot(leader.high_watermark, b"state-after-%d" % leader.high_watermark)
    assert leader.log_start == leader.high_watermark and net.nodes[behind].log_end < leader.log_start
    leader.propose(b"after")
    net.cut = set()
    net.ticks(5)
    follower = net.nodes[behind]
    assert follower.snapshot is not None and follower.snapshot.end_offset == leader.log_start
    assert net.applied[behind] == [b"state-after-%d" % leader.log_start, b"after"]


def _sent(n: QuorumNode) -> tuple[tuple[int, Message], ...]:
    """The messages of `n`'s next Ready (taken and advanced: one Ready at a time)."""
    r = n.ready()
    n.advance(r)
    return r.messages


def test_stale_epochs_and_strangers_are_refused() -> None:
    net = Net()
    net.ticks(20)
    leader = net.leader()
    follower = next(n for n in net.nodes.values() if n is not leader)
    for n in (leader, follower):
        _sent(n)  # what was pending goes unsent: only the answers below are looked at
    follower.receive(leader.id, VoteRequest(leader.epoch - 1, leader.id, 100, 100, pre_vote=False))
    [(dst, resp)] = _sent(follower)
    assert isinstance(resp, VoteResponse) and not resp.granted and resp.epoch == leader.epoch
    leader.receive(99, FetchRequest(leader.epoch, 99, 0, -1))  # not a voter: ignored
    assert not _sent(leader)
    leader.receive(follower.id, FetchRequest(leader.epoch - 1, follower.id, 0, -1))
    [(_, fenced)] = _sent(leader)
    assert getattr(fenced, "fenced", False) and fenced.epoch == leader.epoch  # type: ignore[union-attr]


def test_a_restarted_node_keeps_its_vote() -> None:
    """The vote is in the Ready's hard state, persisted before the response leaves: a node
    restarted from what it persisted will not vote again in the same epoch."""
    n = QuorumNode(2, frozenset({1, 2, 3}), Persisted(), CFG)
    n.receive(1, VoteRequest(1, 1, -1, -1, pre_vote=False))
    r = n.ready()
    assert r.hard_state == (1, 1) and isinstance(r.messages[0][1], VoteResponse) and r.messages[0][1].granted
    again = QuorumNode(2, frozenset({1, 2, 3}), Persisted(1, 1, None, ()), CFG)
    again.receive(3, VoteRequest(1, 3, -1, -1, pre_vote=False))
    assert not again.ready().messages[0][1].granted  # type: ignore[union-attr]


def test_a_resigning_leader_hands_over_without_a_fetch_timeout() -> None:
    net = Net()
    net.ticks(20)
    old = net.leader()
    epoch = old.epoch
    old.resign()
    net.cut = set()
    net.flush()
    net.ticks(3)  # well inside the fetch timeout (8 ticks): only the handover can explain a new leader
    new = net.leader()
    assert new is not old and new.epoch == epoch + 1
    assert old.role == Role.FOLLOWER and old.leader == new.id


def test_input_while_a_ready_is_persisted_goes_into_the_next_ready() -> None:
    """The shell persists a Ready on an I/O thread and keeps feeding the node meanwhile: what
    that input changes is neither counted durable nor dropped by the advance of the Ready in
    flight, but carried by the next one."""
    n = QuorumNode(1, frozenset({1}), Persisted(), CFG)  # alone: leads at once
    first = n.ready()
    assert [e.offset for e in first.entries] == [0] and not n.has_ready()
    offset = n.propose(b"x")  # arrives while `first` is being written
    n.advance(first)
    second = n.ready()
    assert [e.offset for e in second.entries] == [offset]  # still to be written
    assert [e.offset for e in second.committed] == [0]  # not committed before it is on disk
    n.advance(second)
    assert [e.data for e in n.ready().committed] == [b"x"]

    v = QuorumNode(2, frozenset({1, 2, 3}), Persisted(), CFG)
    v.receive(1, VoteRequest(1, 1, -1, -1, pre_vote=False))
    voted = v.ready()
    assert voted.hard_state == (1, 1)
    v.receive(3, VoteRequest(2, 3, -1, -1, pre_vote=False))  # a newer epoch, while the first vote is written
    v.advance(voted)
    again = v.ready()
    assert again.hard_state == (2, 3)  # the second vote is persisted before its answer leaves
    assert [m.granted for _, m in again.messages if isinstance(m, VoteResponse)] == [True]


def test_a_leader_only_heard_of_does_not_refuse_pre_votes() -> None:
    """Simulation seed 1201 (docs/testing.md): after a partition healed, the old leader had
    resigned (prospective, its log the longest), and the two others took turns being prospective
    and, refused a pre-vote by a majority, following the leader a peer named; each then refused
    the other's and the old leader's pre-votes as if it had a live leader, and no election ever
    started (154 s, to the end of the run). Being told who leads is not hearing from it: a voter
    refuses a pre-vote for a live leader only once that leader itself has answered it."""
    n = QuorumNode(1, frozenset({1, 2, 3}), Persisted(), CFG, random.Random(1))
    for _ in range(4 * CFG.election_timeout_ticks):
        n.tick()
        if n.role == Role.PROSPECTIVE:
            break
    assert n.role == Role.PROSPECTIVE
    _sent(n)
    n.receive(3, VoteResponse(n.epoch, False, True, None))  # the resigned leader: our log is behind
    n.receive(2, VoteResponse(n.epoch, False, True, 3))  # a peer that follows 3
    assert n.role == Role.FOLLOWER and n.leader == 3  # it tries the leader it was told of
    _sent(n)
    n.tick()
    n.receive(2, VoteRequest(n.epoch + 1, 2, n.log_end - 1, n.last_epoch, pre_vote=True))
    answers = [m for _, m in _sent(n) if isinstance(m, VoteResponse)]
    assert [a.granted for a in answers] == [True], answers
