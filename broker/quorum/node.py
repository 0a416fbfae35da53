"""The metadata quorum's Raft core, sans-IO: KRaft's rules as a plain object.

Feed it ticks (`tick`), messages (`receive`) and proposals (`propose`); take a `Ready` — what to
persist, what to send, what is committed — persist it, send, apply, then `advance`. Nothing here
does I/O or knows about asyncio, so a deterministic simulation (tests/sim/) drives the same code
the broker runs (broker/quorum/shell.py), the way etcd's raft library is used.

KRaft's shape of Raft:
* epochs are terms; a leader starts its epoch with an empty marker entry, and commits only
  entries of its own epoch (older ones commit with it);
* replication is pull-based: followers Fetch from their log end with the epoch of their last
  entry; a leader whose log disagrees answers with a diverging epoch and end offset, and the
  follower truncates to where both logs last agree (no follower is ever pushed to);
* pre-vote (KIP-996): a node that lost its leader first asks, without changing any state,
  whether a majority would vote for it, so a node cut off for a while cannot depose a healthy
  leader by bumping the epoch when it comes back;
* check-quorum: a leader that has not heard a majority's fetches for a while steps down;
* promises: a voter that took a leader's entries grants no vote, pre-vote or real, for a fetch
  timeout, and a restarted voter none for a fetch timeout after it starts — what the leader's
  lease stands on (lease.py);
* snapshots fold the applied prefix of the log; a follower behind the leader's log start
  fetches the snapshot instead.

Durability rule for the caller: everything in a Ready (epoch, vote, truncation, entries,
snapshot) is on disk before any of its messages leaves, so a vote or an acknowledged append is
never forgotten by a crash; its committed entries are applied after that, then `advance`. One
Ready at a time: `ready()` hands over everything pending and the next is taken only after
`advance()`. In between the node may be fed (etcd's contract): the broker persists on an I/O
thread (broker/quorum/shell.py), and ticks, messages and proposals keep arriving meanwhile.
What they change goes into the next Ready, whose messages leave only after it, and so after
this one, is durable: a message never depends on state that is not yet on disk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum

from .messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Snapshot,
    VoteRequest,
    VoteResponse,
)

MAX_FETCH_ENTRIES = 64


class Role(Enum):
    UNATTACHED = "unattached"  # no known leader in this epoch
    FOLLOWER = "follower"
    PROSPECTIVE = "prospective"  # asking for pre-votes, epoch unchanged
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    election_timeout_ticks: int = 10  # randomised in [t, 2t) for unattached nodes
    fetch_timeout_ticks: int = 15  # a follower that hears nothing from its leader this long looks for another
    fetch_retry_ticks: int = 2  # re-send a fetch that got no answer
    begin_epoch_retry_ticks: int = 3  # a new leader repeats BeginQuorumEpoch to voters not fetching yet


@dataclass(frozen=True, slots=True)
class Persisted:
    """What a node keeps on disk: restart from this after a crash."""

    epoch: int = 0
    voted_for: int | None = None
    snapshot: Snapshot | None = None
    entries: tuple[Entry, ...] = ()  # from the snapshot's end offset on


@dataclass(frozen=True, slots=True)
class Ready:
    hard_state: tuple[int, int | None] | None  # (epoch, voted_for) to persist, if changed
    truncate_to: int | None  # drop persisted entries at and after this offset first
    entries: tuple[Entry, ...]  # then append these
    snapshot: Snapshot | None  # persist, and drop the entries below its end offset
    messages: tuple[tuple[int, Message], ...]  # send once the above is durable
    restore: Snapshot | None  # the state machine restarts from this snapshot (sent by the leader)
    committed: tuple[Entry, ...]  # then apply these, in order


@dataclass
class _Leader:
    match: dict[int, int]  # voter -> log end it has confirmed holding (by fetching from there)
    heard: dict[int, int]  # voter -> tick of its last fetch
    begin_sent: int = -(10**9)
    # Fetches with nothing new to return wait here (KRaft's long poll) until an append, a higher
    # high watermark, or the next tick answers them: no busy request/response loop when idle.
    parked: dict[int, FetchRequest] = field(default_factory=dict)
    sent_hw: dict[int, int] = field(default_factory=dict)  # voter -> high watermark last told


@dataclass
class _Election:
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


class QuorumNode:
    def __init__(self, node_id: int, voters: frozenset[int], persisted: Persisted,
                 config: QuorumConfig | None = None, rng: random.Random | None = None) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not among the voters {sorted(voters)}")
        self.id = node_id
        self.voters = voters
        self.cfg = config or QuorumConfig()
        self.rng = rng or random.Random(node_id)
        self.epoch = persisted.epoch
        self.voted_for = persisted.voted_for
        self.snapshot = persisted.snapshot
        self.log: list[Entry] = list(persisted.entries)
        self.role = Role.UNATTACHED
        self.leader: int | None = None
        self.high_watermark = self.log_start
        self.now = 0
        self._last_contact = 0  # tick of the last sign of a live leader (or of the role's start)
        # tick of the last message from the leader itself (a fetch answer, BeginQuorumEpoch): what a
        # pre-vote is refused for. Following a leader a peer named (a refused pre-vote's answer)
        # is not hearing from it: counted as such, two voters told of a resigned leader refused
        # each other's pre-votes for ever (simulation seed 1201).
        self._leader_heard = -self.cfg.fetch_timeout_ticks  # never
        # No vote before this tick (lease.py). A node that knew an epoch may have promised a
        # leader just before it stopped, so a restart keeps a whole fetch timeout.
        self._promise_until = self.cfg.fetch_timeout_ticks if persisted.epoch > 0 else 0
        self._timeout = self._random_timeout()
        self._last_fetch_sent = -(10**9)
        self._election = _Election()
        self._lead: _Leader | None = None
        self.epoch_start_offset = -1  # where this node's leadership began (its marker entry)
        # Ready bookkeeping
        self._hs_dirty = False
        self._truncated: int | None = None
        self._stable_end = self.log_end  # entries below this are on disk
        self._snapshot_dirty: Snapshot | None = None
        self._restore: Snapshot | None = None
        self._out: list[tuple[int, Message]] = []
        self._free: list[tuple[int, Message]] = []  # answers that wait on no write: see free_messages
        self._applied = self.log_start  # the caller restores the snapshot itself on start
        self._taken_end: int | None = None  # log end when the Ready being persisted was taken
        if len(voters) == 1:
            self._become_candidate()

    # ---- the log ---------------------------------------------------------------------------------
    @property
    def log_start(self) -> int:
        return self.snapshot.end_offset if self.snapshot else 0

    @property
    def log_end(self) -> int:
        return self.log_start + len(self.log)

    def epoch_at(self, offset: int) -> int | None:
        """Epoch of the entry at `offset` (-1 before the log; None where it is not known)."""
        if offset < 0:
            return -1
        if self.snapshot and offset == self.snapshot.end_offset - 1:
            return self.snapshot.epoch
        i = offset - self.log_start
        return self.log[i].epoch if 0 <= i < len(self.log) else None

    @property
    def last_epoch(self) -> int:
        e = self.epoch_at(self.log_end - 1)
        return -1 if e is None else e

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends): KRaft's divergence
        point. With no such epoch, (-1, log start)."""
        found, end = -1, self.log_start
        if self.snapshot and self.snapshot.epoch <= epoch:
            found = self.snapshot.epoch
        for e in self.log:
            if e.epoch > epoch:
                break
            found, end = e.epoch, e.offset + 1
        if found == -1 and self.snapshot is None:
            return -1, 0
        return found, end

    def _truncate(self, end: int) -> None:
        if end >= self.log_end:
            return
        if end < self.high_watermark:
            raise AssertionError(f"node {self.id}: truncating to {end} below the high watermark {self.high_watermark}")
        del self.log[end - self.log_start:]
        self._truncated = end if self._truncated is None else min(self._truncated, end)
        self._stable_end = min(self._stable_end, end)

    def _append(self, entries: list[Entry]) -> None:
        self.log.extend(entries)

    def lease_confirmations(self) -> dict[int, int]:
        """For a leader: voter -> the newest entry of this leader's epoch that the voter has
        confirmed holding by fetching past it (its promise starts no earlier than that entry's
        append: lease.py). Empty for anyone else."""
        lead = self._lead
        if self.role != Role.LEADER or lead is None or self.epoch_start_offset < 0:
            return {}
        return {v: m - 1 for v, m in lead.match.items() if m - 1 >= self.epoch_start_offset}

    @property
    def serving(self) -> bool:
        """Leader, with its own epoch committed and everything committed applied by the caller:
        only then does the caller's state hold every earlier decision, so new ones may be taken.
        (The simulation found the gap: a leader whose committed entries were not applied yet
        handed out producer ids from a stale image.)"""
        return (self.role == Role.LEADER and self.high_watermark > self.epoch_start_offset >= 0
                and self._applied >= self.high_watermark)

    # ---- inputs ----------------------------------------------------------------------------------
    def tick(self) -> None:
        self.now += 1
        if self.role == Role.LEADER:
            self._leader_tick()
        elif self.role == Role.FOLLOWER:
            if self.now - self._last_contact >= self.cfg.fetch_timeout_ticks:
                self._become_prospective()
            elif self.now - self._last_fetch_sent >= self.cfg.fetch_retry_ticks:
                self._send_fetch()
        elif self.now - self._last_contact >= self._timeout:
            # unattached, or an election that went nowhere: ask for pre-votes (again)
            self._become_prospective()

    def propose(self, data: bytes) -> int | None:
        """Append `data` if this node leads; returns its offset, or None (ask the leader)."""
        if self.role != Role.LEADER or not data:
            return None
        offset = self.log_end
        self._append([Entry(offset, self.epoch, data)])
        self._maybe_commit()
        self._answer_parked()
        return offset

    def take_snapshot(self, end_offset: int, data: bytes) -> None:
        """The caller applied everything below `end_offset` and serialised it as `data`."""
        if not self.log_start < end_offset <= min(self.high_watermark, self._applied):
            return
        epoch = self.epoch_at(end_offset - 1)
        assert epoch is not None
        snap = Snapshot(end_offset, epoch, data)
        del self.log[:end_offset - self.log_start]
        self.snapshot = snap
        self._snapshot_dirty = snap

    def resign(self) -> None:
        """Stop leading before a clean shutdown: tell the voters (most caught-up first) so the next
        election starts now rather than a fetch timeout later. Nothing committed is affected."""
        if self.role != Role.LEADER or self._lead is None:
            return
        match = self._lead.match
        preferred = tuple(sorted(self.voters - {self.id}, key=lambda v: (-match.get(v, 0), v)))
        self._broadcast(EndQuorumEpoch(self.epoch, self.id, preferred))
        self.role, self.leader, self._lead = Role.UNATTACHED, None, None
        self._last_contact = self.now
        self._timeout = 3 * self._random_timeout()  # let the preferred voters go first

    def receive(self, src: int, msg: Message) -> None:
        if src not in self.voters:
            return  # only voters take part (observers are not supported yet)
        if isinstance(msg, VoteRequest):
            self._on_vote_request(src, msg)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(src, msg)
        elif isinstance(msg, BeginQuorumEpoch):
            self._on_begin_epoch(msg)
        elif isinstance(msg, EndQuorumEpoch):
            self._on_end_epoch(msg)
        elif isinstance(msg, FetchRequest):
            self._on_fetch(src, msg)
        elif isinstance(msg, FetchResponse):
            self._on_fetch_response(src, msg)
        elif isinstance(msg, FetchSnapshotRequest):
            self._on_fetch_snapshot(src, msg)
        elif isinstance(msg, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(src, msg)

    # ---- output ----------------------------------------------------------------------------------
    def has_ready(self) -> bool:
        """Something to persist, send or apply, and no Ready outstanding (taken, not advanced)."""
        if self._taken_end is not None:
            return False
        return bool(self._hs_dirty or self._truncated is not None or self._stable_end < self.log_end
                    or self._snapshot_dirty or self._out or self._free or self._restore
                    or self._applied < self.high_watermark)

    def ready(self) -> Ready:
        """Everything pending, handed over: what changes from now on goes into the next Ready."""
        if self._taken_end is not None:
            raise AssertionError(f"node {self.id}: a Ready is still outstanding (advance() it first)")
        msgs, self._out, self._free = (*self._free, *self._out), [], []
        start = max(self._applied, self.log_start)
        committed = tuple(self.log[start - self.log_start:self.high_watermark - self.log_start])
        ready = Ready(
            hard_state=(self.epoch, self.voted_for) if self._hs_dirty else None,
            truncate_to=self._truncated,
            entries=tuple(self.log[self._stable_end - self.log_start:]) if self._stable_end >= self.log_start
            else tuple(self.log),
            snapshot=self._snapshot_dirty,
            messages=msgs,
            restore=self._restore,
            committed=committed,
        )
        self._hs_dirty = False
        self._truncated = None
        self._snapshot_dirty = None
        self._restore = None
        self._taken_end = self.log_end
        return ready

    def free_messages(self) -> list[tuple[int, Message]]:
        """Answers that depend on nothing unwritten, to send now even while a Ready is being
        written: refusals of votes that changed no state (a pre-vote, a vote asked of a voter
        bound by its promise). A leader whose disk is slow must not hold back the refusal that
        tells a returning voter whom to follow, or the voter follows nobody and, with another
        voter down, check-quorum deposes the leader. Whatever is not taken here goes out with the
        next Ready."""
        free, self._free = self._free, []
        return free

    def advance(self, ready: Ready) -> None:
        """`ready` is durable and applied. Entries appended since it was taken are not (the next
        Ready carries them), nor those a truncation since then dropped and may re-append."""
        taken_end = self._taken_end
        if taken_end is None:
            raise AssertionError(f"node {self.id}: advance() without an outstanding Ready")
        self._taken_end = None
        durable = taken_end if self._truncated is None else min(taken_end, self._truncated)
        self._stable_end = min(durable, self.log_end)
        if ready.committed:
            self._applied = max(self._applied, ready.committed[-1].offset + 1)
        self._applied = max(self._applied, self.log_start)
        if self.role == Role.LEADER:
            self._maybe_commit()  # our own entries count once they are on our disk

    # ---- roles -----------------------------------------------------------------------------------
    def _random_timeout(self) -> int:
        t = self.cfg.election_timeout_ticks
        return t + self.rng.randrange(t)

    def _set_epoch(self, epoch: int, leader: int | None) -> None:
        """Move to a newer epoch: no vote cast in it yet; follow `leader` if known."""
        self.epoch = epoch
        self.voted_for = None
        self._hs_dirty = True
        self._lead = None
        if leader is None:
            self.role, self.leader = Role.UNATTACHED, None
            self._last_contact = self.now
            self._timeout = self._random_timeout()
        else:
            self._follow(leader)

    def _follow(self, leader: int) -> None:
        self.role, self.leader, self._lead = Role.FOLLOWER, leader, None
        self._last_contact = self.now
        self._send_fetch()

    def _become_prospective(self) -> None:
        if len(self.voters) == 1:
            self._become_candidate()
            return
        self.role, self.leader, self._lead = Role.PROSPECTIVE, None, None
        self._election = _Election(granted={self.id})
        self._last_contact = self.now
        self._timeout = self._random_timeout()
        req = VoteRequest(self.epoch + 1, self.id, self.log_end - 1, self.last_epoch, pre_vote=True)
        self._broadcast(req)

    def _become_candidate(self) -> None:
        self.epoch += 1
        self.voted_for = self.id
        self._hs_dirty = True
        self.role, self.leader, self._lead = Role.CANDIDATE, None, None
        self._election = _Election(granted={self.id})
        self._last_contact = self.now
        self._timeout = self._random_timeout()
        if self._majority(self._election.granted):
            self._become_leader()
            return
        self._broadcast(VoteRequest(self.epoch, self.id, self.log_end - 1, self.last_epoch, pre_vote=False))

    def _become_leader(self) -> None:
        self.role, self.leader = Role.LEADER, self.id
        others = self.voters - {self.id}
        self._lead = _Leader(match={v: 0 for v in others}, heard={v: self.now for v in others})
        self.epoch_start_offset = self.log_end
        self._append([Entry(self.log_end, self.epoch, b"")])  # starts the epoch; commits the older entries with it
        self._send_begin_epoch()
        self._maybe_commit()

    def _majority(self, nodes: set[int]) -> bool:
        return len(nodes & self.voters) * 2 > len(self.voters)

    def _broadcast(self, msg: Message) -> None:
        for v in sorted(self.voters - {self.id}):
            self._out.append((v, msg))

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.last_epoch, self.log_end - 1)

    # ---- voting ----------------------------------------------------------------------------------
    def _on_vote_request(self, src: int, req: VoteRequest) -> None:
        if self.now < self._promise_until:
            # promised to the leader whose entries it took: no vote, and no move to the
            # candidate's epoch either (that would free it to vote in the new epoch at once)
            epoch = max(self.epoch, req.epoch - 1) if req.pre_vote else self.epoch
            self._free.append((src, VoteResponse(epoch, False, req.pre_vote, self.leader)))
            return
        if req.pre_vote:
            # Changes nothing here. Granted only to an up-to-date log, and only if this node has
            # no live leader itself: that is what keeps a returning node from deposing one.
            live_leader = self.role == Role.LEADER or (
                self.role == Role.FOLLOWER and self.now - self._leader_heard < self.cfg.fetch_timeout_ticks)
            granted = (req.epoch > self.epoch and not live_leader
                       and self._log_up_to_date(req.last_epoch, req.last_offset))
            self._free.append((src, VoteResponse(max(self.epoch, req.epoch - 1), granted, True, self.leader)))
            return
        if req.epoch < self.epoch:
            self._out.append((src, VoteResponse(self.epoch, False, False, self.leader)))
            return
        if req.epoch > self.epoch:
            self._set_epoch(req.epoch, None)
        granted = (self.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)
                   and self.voted_for in (None, src)
                   and self._log_up_to_date(req.last_epoch, req.last_offset))
        if granted:
            self.voted_for = src
            self._hs_dirty = True
            self._last_contact = self.now  # give the candidate time to win
        self._out.append((src, VoteResponse(self.epoch, granted, False, self.leader)))

    def _on_vote_response(self, src: int, resp: VoteResponse) -> None:
        if resp.pre_vote:
            if self.role != Role.PROSPECTIVE or resp.epoch > self.epoch:
                if resp.epoch > self.epoch:
                    self._set_epoch(resp.epoch, resp.leader)
                return
            (self._election.granted if resp.granted else self._election.rejected).add(src)
            if self._majority(self._election.granted):
                self._become_candidate()
            elif resp.leader is not None and resp.leader != self.id and (
                    resp.leader == src or self._majority(self._election.rejected)):
                # The leader's own refusal is its word that it leads this epoch: follow it at
                # once, or, with another voter down, it hears no majority and check-quorum
                # deposes it. A peer only naming a leader counts once a majority refused.
                self._follow(resp.leader)
            return
        if resp.epoch > self.epoch:
            self._set_epoch(resp.epoch, resp.leader)
            return
        if self.role != Role.CANDIDATE or resp.epoch < self.epoch:
            return
        (self._election.granted if resp.granted else self._election.rejected).add(src)
        if self._majority(self._election.granted):
            self._become_leader()

    def _on_begin_epoch(self, msg: BeginQuorumEpoch) -> None:
        if msg.epoch < self.epoch:
            return
        if msg.epoch > self.epoch:
            self._set_epoch(msg.epoch, msg.leader)
        elif self.role != Role.LEADER and self.leader is None:
            self._follow(msg.leader)
        if self.leader == msg.leader:
            self._leader_heard = self.now

    def _on_end_epoch(self, msg: EndQuorumEpoch) -> None:
        if msg.epoch != self.epoch or self.leader != msg.leader or self.role != Role.FOLLOWER:
            return
        # The leader is leaving: the most caught-up voter asks for votes at once, the next ones a
        # little later each (if the first cannot win, they still do not wait a whole fetch timeout).
        rank = msg.preferred.index(self.id) if self.id in msg.preferred else len(msg.preferred)
        self._promise_until = self.now  # the leader gave up its lease with its leadership
        self.role, self.leader = Role.UNATTACHED, None
        self._last_contact = self.now
        self._timeout = 2 * rank
        if rank == 0:
            self._become_prospective()

    # ---- replication: the leader's side ------------------------------------------------------------
    def _leader_tick(self) -> None:
        lead = self._lead
        assert lead is not None
        self._answer_parked()  # a parked fetch waits at most one tick
        if self.now - lead.begin_sent >= self.cfg.begin_epoch_retry_ticks:
            self._send_begin_epoch(only_silent=True)
        heard = {v for v, t in lead.heard.items() if self.now - t < 2 * self.cfg.fetch_timeout_ticks} | {self.id}
        if not self._majority(heard):
            # check-quorum: cut off from a majority, stop claiming leadership of this epoch
            self.role, self.leader, self._lead = Role.UNATTACHED, None, None
            self._last_contact = self.now
            self._timeout = self._random_timeout()

    def _send_begin_epoch(self, only_silent: bool = False) -> None:
        lead = self._lead
        assert lead is not None
        lead.begin_sent = self.now
        for v in sorted(self.voters - {self.id}):
            if only_silent and lead.match.get(v, 0) > 0:
                continue
            self._out.append((v, BeginQuorumEpoch(self.epoch, self.id)))

    def _on_fetch(self, src: int, req: FetchRequest) -> None:
        if req.epoch > self.epoch:
            self._set_epoch(req.epoch, None)
        if self.role != Role.LEADER or req.epoch < self.epoch:
            self._out.append((src, FetchResponse(self.epoch, self.leader, req.fetch_offset, fenced=True)))
            return
        lead = self._lead
        assert lead is not None
        lead.heard[src] = self.now
        if self.snapshot and (req.fetch_offset < self.log_start or (
                req.fetch_offset == self.log_start and req.last_fetched_epoch != self.snapshot.epoch)):
            self._out.append((src, FetchResponse(self.epoch, self.id, req.fetch_offset,
                                                 high_watermark=self.high_watermark,
                                                 snapshot_end_offset=self.snapshot.end_offset)))
            return
        if req.fetch_offset > 0 or req.last_fetched_epoch != -1:
            epoch, end = self.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                self._out.append((src, FetchResponse(self.epoch, self.id, req.fetch_offset,
                                                     high_watermark=self.high_watermark,
                                                     diverging_epoch=epoch,
                                                     diverging_end_offset=min(end, req.fetch_offset))))
                return
        # The follower's log matches ours up to fetch_offset, and it is durable there.
        lead.match[src] = max(lead.match.get(src, 0), req.fetch_offset)
        lead.parked.pop(src, None)
        self._maybe_commit()
        if req.fetch_offset >= self.log_end and lead.sent_hw.get(src) == self.high_watermark:
            lead.parked[src] = req
            return
        self._answer(src, req)

    def _answer(self, src: int, req: FetchRequest) -> None:
        lead = self._lead
        assert lead is not None
        i = req.fetch_offset - self.log_start
        entries = tuple(self.log[i:i + MAX_FETCH_ENTRIES])
        lead.sent_hw[src] = self.high_watermark
        self._out.append((src, FetchResponse(self.epoch, self.id, req.fetch_offset, entries=entries,
                                             high_watermark=self.high_watermark)))

    def _answer_parked(self) -> None:
        lead = self._lead
        if self.role != Role.LEADER or lead is None:
            return
        parked, lead.parked = lead.parked, {}
        for src, req in sorted(parked.items()):
            self._answer(src, req)

    def _maybe_commit(self) -> None:
        lead = self._lead
        if self.role != Role.LEADER or lead is None:
            return
        ends = sorted([self._stable_end] + [lead.match.get(v, 0) for v in self.voters if v != self.id],
                      reverse=True)
        candidate = ends[len(self.voters) // 2]
        if candidate > self.high_watermark and self.epoch_at(candidate - 1) == self.epoch:
            self.high_watermark = candidate
            self._answer_parked()

    def _on_fetch_snapshot(self, src: int, req: FetchSnapshotRequest) -> None:
        if self.role != Role.LEADER or req.epoch != self.epoch:
            self._out.append((src, FetchSnapshotResponse(self.epoch, self.leader, None)))
            return
        snap = self.snapshot if self.snapshot and self.snapshot.end_offset == req.end_offset else None
        self._out.append((src, FetchSnapshotResponse(self.epoch, self.id, snap)))

    # ---- replication: the follower's side ------------------------------------------------------------
    def _send_fetch(self) -> None:
        if self.leader is None or self.leader == self.id:
            return
        self._last_fetch_sent = self.now
        self._out.append((self.leader, FetchRequest(self.epoch, self.id, self.log_end, self.last_epoch)))

    def _heard_from_leader(self, epoch: int, leader: int | None) -> bool:
        """Common handling of a leader's answer; False when it is stale and must be ignored."""
        if epoch > self.epoch:
            self._set_epoch(epoch, leader)
            return False
        if epoch < self.epoch or leader is None or leader == self.id or self.role == Role.LEADER:
            return False
        self._leader_heard = self.now
        if self.role != Role.FOLLOWER or self.leader != leader:
            self._follow(leader)
            return False
        self._last_contact = self.now
        self._promise_until = self.now + self.cfg.fetch_timeout_ticks
        return True

    def _on_fetch_response(self, src: int, resp: FetchResponse) -> None:
        if resp.fenced:
            if resp.epoch > self.epoch:
                self._set_epoch(resp.epoch, resp.leader)
            return
        if not self._heard_from_leader(resp.epoch, resp.leader) or resp.fetch_offset != self.log_end:
            return  # stale, duplicated or reordered: the fetch it answers is not our current one
        if resp.snapshot_end_offset is not None:
            self._out.append((src, FetchSnapshotRequest(self.epoch, self.id, resp.snapshot_end_offset)))
            self._last_fetch_sent = self.now
            return
        if resp.diverging_end_offset is not None:
            own_epoch, own_end = self.end_offset_for_epoch(resp.diverging_epoch if resp.diverging_epoch is not None
                                                           else -1)
            target = min(resp.diverging_end_offset, own_end if own_epoch >= 0 else self.log_start)
            self._truncate(max(target, self.high_watermark))
            self._send_fetch()
            return
        if resp.entries:
            if resp.entries[0].offset != self.log_end:
                return
            self._append(list(resp.entries))
        hw = min(resp.high_watermark, self.log_end)
        if hw > self.high_watermark:
            self.high_watermark = hw
        self._send_fetch()

    def _on_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse) -> None:
        if not self._heard_from_leader(resp.epoch, resp.leader) or resp.snapshot is None:
            return
        snap = resp.snapshot
        if snap.end_offset <= self.high_watermark:
            self._send_fetch()
            return
        keep = self.epoch_at(snap.end_offset - 1) == snap.epoch
        self.log = [e for e in self.log if e.offset >= snap.end_offset] if keep else []
        if not keep:
            self._truncated = snap.end_offset if self._truncated is None else min(self._truncated, snap.end_offset)
        self.snapshot = snap
        self._snapshot_dirty = snap
        self._restore = snap
        self._stable_end = max(min(self._stable_end, self.log_end), snap.end_offset)
        self.high_watermark = snap.end_offset
        self._applied = snap.end_offset
        self._send_fetch()
