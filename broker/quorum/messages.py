"""What quorum nodes say to each other, as plain values (no bytes, no sockets).

The shapes follow Kafka's KRaft messages — Vote (52, with KIP-996's pre-vote flag),
BeginQuorumEpoch (53), Fetch of the metadata log (1) and FetchSnapshot (59) — so the shell that
puts them on the wire maps field to field. Replication is pull-based as in KRaft: followers
Fetch from the leader; the leader never pushes entries.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of the metadata log: its offset, the epoch of the leader that wrote it, and
    opaque data (a metadata record). Empty data is the leader's own epoch-start marker."""

    offset: int
    epoch: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The applied state up to (not including) `end_offset`, whose last entry had `epoch`."""

    end_offset: int
    epoch: int
    data: bytes


@dataclass(frozen=True, slots=True)
class VoteRequest:
    epoch: int  # the epoch the candidate asks for (current + 1 for a pre-vote)
    candidate: int
    last_offset: int  # offset of the candidate's last entry (log end - 1; -1 when empty)
    last_epoch: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int  # the responder's epoch (it may be newer than the request's)
    granted: bool
    pre_vote: bool
    leader: int | None = None  # the leader the responder follows, if any


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    epoch: int
    leader: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A leader stepping down (clean shutdown): the voters need not wait for a fetch timeout.
    `preferred` are the voters most caught up, best first; they start an election in that order."""

    epoch: int
    leader: int
    preferred: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int
    replica: int
    fetch_offset: int  # the follower's log end
    last_fetched_epoch: int  # epoch of the entry before fetch_offset (-1: none)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    epoch: int
    leader: int | None
    fetch_offset: int  # echoed, so a late or duplicated answer to an older fetch is recognised
    fenced: bool = False  # the request's epoch is not the leader's: the follower must catch up
    entries: tuple[Entry, ...] = ()
    high_watermark: int = 0
    # The follower's log diverges (KRaft DivergingEpoch): the leader's last epoch not after the
    # follower's, and where that epoch ends in the leader's log. Truncate, then fetch again.
    diverging_epoch: int | None = None
    diverging_end_offset: int | None = None
    # The follower needs entries the leader has folded into a snapshot: fetch this snapshot first.
    snapshot_end_offset: int | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    epoch: int
    leader: int | None
    snapshot: Snapshot | None  # None: the leader no longer has that snapshot (fetch again)


Message = (VoteRequest | VoteResponse | BeginQuorumEpoch | EndQuorumEpoch | FetchRequest | FetchResponse
           | FetchSnapshotRequest | FetchSnapshotResponse)
