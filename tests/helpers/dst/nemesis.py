"""The simulation's nemesis: seeded faults, one at a time or two close together.

The chaos suite's nemesis holds one fault at a time, because real processes make a second fault's
timing unrepeatable; the review's loss paths needed two (a stall during a failover, a crash while
a registration is in flight). Here timing is exact and replayed, so a fault can start while another
is held: every gap between faults is drawn from the seed, and a fifth of them are short enough
to land inside the previous fault. Targets are nodes, and role targets (the quorum leader, a
partition's leader) are resolved when the fault starts, from the brokers' state.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from broker.partition import Isolation
from broker.partitioning import partition_for
from broker.txn.log_records import decode_value
from broker.txn.state import TxnState
from client.admin import Admin
from client.errors import KafkaClientError
from protocol.records import decode_batches
from protocol.topic_partition import TopicPartition

from .clock import SimClock
from .cluster import SimCluster
from .loop import Process
from .workload import COPIER_GROUP

POWER_LOSS_GAP_S = 60.0  # after a power cut, another waits this long (the first broker's replicas catch up)
KINDS = ("kill", "power-loss", "pause", "isolate", "one-way", "bridge", "clock", "slow-disk", "strand", "rack",
         "takeover", "rejoin", "flip", "app-pause", "reap-flip")
TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
# The partitions a role target or a `strand` is drawn from: the workload's and the coordinators'.
TOPICS = ("mixed", "pair", "__transaction_state", "__consumer_offsets")


class Nemesis:
    def __init__(self, cluster: SimCluster, rng: random.Random, note: Callable[..., None],
                 kinds: tuple[str, ...] = KINDS, gap: tuple[float, float] = (1.0, 8.0),
                 apps: Callable[[], list[Process]] = list,
                 txn_apps: Callable[[], dict[str, Process]] = dict) -> None:
        self.cluster = cluster
        self.apps = apps  # the workload's application processes (`app-pause`)
        self.txn_apps = txn_apps  # transactional id -> the application that holds it (`reap-flip`)
        self.loop = cluster.loop
        self.rng = rng
        self.note = note
        self.kinds = kinds
        self.gap = gap
        self.counts: Counter[str] = Counter()
        self.held: list[asyncio.Task[None]] = []
        self.down: set[int] = set()  # nodes a held fault has taken (killed, paused or cut off)
        self.crashed: set[int] = set()  # nodes killed or powered off, until back in every ISR of theirs
        self.power_lost: dict[int, float] = {}  # node -> when it last lost power

    async def run(self, seconds: float) -> None:
        end = self.loop.time() + seconds
        while self.loop.time() < end:
            quick = self.rng.random() < 0.2  # the second of two faults close together
            await asyncio.sleep(self.rng.uniform(0.05, 1.0) if quick else self.rng.uniform(*self.gap))
            if self.loop.time() >= end:
                break
            kind = self.rng.choice(self.kinds)
            self.held.append(self.loop.create_task(self.inflict(kind)))
        await asyncio.gather(*self.held, return_exceptions=True)

    def target(self) -> int | None:
        """A node no held fault has taken, preferring a role (quorum leader, a partition leader)."""
        free = [n for n in self.cluster.nodes if n not in self.down and self.cluster.nodes[n].up]
        if len(free) < 2 and len(self.down) >= 1 and self.rng.random() < 0.7:
            return None  # mostly keep a majority, sometimes take it (two faults at once)
        if not free:
            return None
        roll = self.rng.random()
        if roll < 0.3:
            leader = self._quorum_leader()
            if leader in free:
                return leader
        elif roll < 0.6:
            leader = self._partition_leader()
            if leader in free:
                return leader
        return self.rng.choice(free)

    def _quorum_leader(self) -> int | None:
        for n, node in self.cluster.nodes.items():
            if node.up and node.broker is not None and node.broker.quorum.serving:
                return n
        return None

    def _partition_leader(self) -> int | None:
        topic = self.rng.choice(TOPICS[:2])
        index = self.rng.randrange(3)
        return self._leader_of(topic, index)

    def _leader_of(self, topic: str, index: int) -> int | None:
        for n, node in self.cluster.nodes.items():
            if not node.up or node.broker is None:
                continue
            t = node.broker.topics.get(topic)
            if t is not None and index in t.local and t.local[index].is_leader:
                return n
        return None

    def _replicas_of(self, topic: str, index: int, leader: int) -> list[int]:
        """The partition's replicas as its leader's metadata has them."""
        b = self.cluster.nodes[leader].broker
        assert b is not None
        t = b.topics.get(topic)
        part = t.local.get(index) if t is not None else None
        a = part.assignment if part is not None else None
        return sorted(a.replicas) if a is not None else []

    def power_loss_allowed(self, n: int) -> bool:
        """Whether losing `n`'s unsynced writes stays inside the promise: Kafka does not fsync per
        write, so an acknowledged record is safe while at least one in-sync replica keeps it. A
        power cut is held back while another broker is down, cut off or paused, or lost power
        within POWER_LOSS_GAP_S, or while some partition's in-sync replicas are `n` alone (as the
        active controller's image says)."""
        now = self.loop.time()
        if any(m != n and (m in self.down or now - t < POWER_LOSS_GAP_S) for m, t in self.power_lost.items()) \
                or any(m != n for m in self.down):
            return False
        image = next((node.broker.controller.image for node in self.cluster.nodes.values()
                      if node.up and node.broker is not None and node.broker.quorum.serving), None)
        if image is None:
            return False
        return all(set(p.isr) - {n} for t in image.topics.values() for p in t.partitions)

    async def inflict(self, kind: str) -> None:
        compound = {"strand": self.strand, "rack": self.rack, "takeover": self.takeover, "rejoin": self.rejoin,
                    "flip": self.flip, "app-pause": self.app_pause, "reap-flip": self.reap_flip}
        if kind in compound:
            await compound[kind]()
            return
        n = self.target()
        if n is None:
            return
        if kind == "power-loss" and not self.power_loss_allowed(n):
            kind = "kill"
        if kind == "power-loss":
            self.power_lost[n] = self.loop.time()
        hold = self.rng.uniform(0.5, 12.0)
        c = self.cluster
        self.counts[kind] += 1
        self.down.add(n)
        try:
            if kind in ("kill", "power-loss"):
                crashed = self._crash(n, kind == "power-loss")
                await asyncio.sleep(hold)
                if crashed:
                    c.start(n)
            elif kind == "pause":
                c.pause(n)
                await asyncio.sleep(hold)
                c.resume(n)
            elif kind in ("isolate", "one-way", "bridge"):
                host = c.nodes[n].host
                others = [o.host for m, o in c.nodes.items() if m != n]
                if kind == "isolate":
                    pairs = [(host, h) for h in others] + [(h, host) for h in others]
                elif kind == "one-way":
                    pairs = [(h, host) for h in others]  # n hears nothing; what it sends arrives
                else:  # n is the bridge: the others cannot reach each other
                    pairs = [(a, b) for a in others for b in others if a != b]
                self.note("cut", kind, n, pairs)
                c.loop.net.cut_links(pairs)
                await asyncio.sleep(hold)
                for p in pairs:
                    c.loop.net.cut.discard(p)
                c.loop.net.heal_held()
                self.note("heal", kind, n)
            elif kind == "clock":
                step = self.rng.choice((-1, 1)) * self.rng.choice((1_000, 60_000, 3_600_000))
                c.step_clock(n, step)
            elif kind == "slow-disk":
                proc = c.nodes[n].proc
                assert proc is not None
                proc.disk_delay = (0.05, self.rng.uniform(0.1, 3.0))
                self.note("slow-disk", n, proc.disk_delay)
                await asyncio.sleep(hold)
                proc.disk_delay = (0.0, 0.002)
                self.note("disk ok", n)
        finally:
            self.down.discard(n)

    async def strand(self) -> None:
        """One broker stalls and another crashes, at a moment chosen relative to the stall, and
        comes back within its session; the stall ends after the restart.

        * `failover`: a partition's follower stalls and its leader crashes right after (or the
          other way round): the new leader's high watermark waits on the stalled replica while
          it takes over as coordinator (issue 23 item 7).
        * `alone`: the same, the crash after the stalled broker was fenced: a leader alone in
          its ISR comes back with a torn log (item 2).
        * `fence`: the two brokers that do not lead the quorum: one stalls, the other restarts
          so that its registration reaches the controller about when the stalled one's session
          ends, while the quorum leader's disk is slow -- the fence and the registration decided
          close together, each while the other is in flight (item 1). With three brokers the
          quorum has no majority while the two are away and no decision commits, so this needs
          five (`--size 5`)."""
        c = self.cluster
        when = self.rng.choice(("failover", "fence", "alone"))
        topic = self.rng.choice(TOPICS)
        index = self.rng.randrange(3)
        session = c.config(c.nodes[1]).broker_session_timeout_ms / 1000
        slow: tuple[float, float] | None = None
        third: int | None = None
        if when == "fence":
            third = self._quorum_leader()
            others = [n for n in c.nodes if n != third]
            if third is None or len(others) < 2:
                return
            stalled, crashed = self.rng.sample(others, 2)
            hold = self.rng.uniform(0.3, 2.5)
            # The stalled broker's fence is decided about 8.5 to 10 s (a session, less the time since
            # its last heartbeat, plus the controller's sweep) after the stall began; a restarted
            # broker registers about 2 s after its start (its first heartbeat interval).
            delay = max(0.0, session - self.rng.uniform(1.5, 4.0) - hold)
            slow = (0.2, self.rng.uniform(0.5, 2.0))
        else:
            leader = self._leader_of(topic, index)
            if leader is None:
                return
            followers = [r for r in self._replicas_of(topic, index, leader) if r != leader]
            if not followers:
                return
            follower = self.rng.choice(followers)
            stalled, crashed = (follower, leader) if self.rng.random() < 0.7 else (leader, follower)
            hold = self.rng.uniform(0.5, 5.0)
            delay = self.rng.uniform(0.0, 0.2) if when == "failover" else session + self.rng.uniform(0.5, 3.0)
        stall = max(delay + hold + self.rng.uniform(0.5, 8.0), self.rng.uniform(10.0, 16.0))
        power_loss = self.rng.random() < 0.6
        taken = {stalled, crashed} | ({third} if third is not None else set())
        if taken & self.down or not all(c.nodes[n].up for n in taken):
            return
        self.counts["strand"] += 1
        self.down.update(taken)
        self.note("strand", when, topic, index, f"stall {stalled} for {stall:.3f}", f"crash {crashed} at +{delay:.3f}",
                  "power-loss" if power_loss else "kill", f"for {hold:.3f}",
                  f"slow disk {third} {slow}" if slow else "")
        try:
            c.pause(stalled)
            await asyncio.sleep(delay)
            down = self._crash(crashed, power_loss)
            if slow is not None and third is not None:
                self._slow(third, slow)
            await asyncio.sleep(hold)
            if down:
                c.start(crashed)
            await asyncio.sleep(stall - delay - hold)
            c.resume(stalled)
            if slow is not None and third is not None:
                self._slow(third, None)
        finally:
            self.down.difference_update(taken)

    async def rack(self) -> None:
        """Two brokers crash together (their rack lost power to the processes, an orchestrator
        restarted both) and start again together: their registrations reach the controller
        close together, each decided while the other may be in flight (issue 23 item 1). A
        process crash: their page caches survive (a power loss of two replicas at once may take
        every copy, which no guarantee covers)."""
        c = self.cluster
        free = [n for n in c.nodes if n not in self.down and c.nodes[n].up]
        if len(free) < 2:
            return
        pair = sorted(self.rng.sample(free, 2))
        hold = self.rng.uniform(0.5, 6.0)
        skew = 0.0 if self.rng.random() < 0.7 else self.rng.uniform(0.0, 0.3)  # mostly at one instant
        self.counts["rack"] += 1
        self.down.update(pair)
        self.note("rack", pair, f"for {hold:.3f}", f"skew {skew:.3f}")
        try:
            crashed = [n for n in pair if self._crash(n, False)]
            await asyncio.sleep(hold)
            for i, n in enumerate(crashed):
                if i:
                    await asyncio.sleep(skew)
                c.start(n)
        finally:
            self.down.difference_update(pair)

    async def takeover(self) -> None:
        """A transaction coordinator's partition changes leader while one of its followers
        stalls, at the worst moment: the leader has confirmed a PrepareCommit (its high
        watermark covers it: the client was told its transaction committed) that the follower
        about to take over holds but does not yet know is committed. The leader crashes, the other follower stalls, both for long
        (issue 23 item 7: the new coordinator must not load before its log end at election is
        committed, however long the stalled follower takes). The quorum needs a majority
        without the two: five brokers (`--size 5`); with three nothing moves until one is back."""
        c = self.cluster
        topic = TXN_TOPIC
        index = self.rng.randrange(3)
        leader = self._leader_of(topic, index)
        if leader is None:
            return
        followers = [r for r in self._replicas_of(topic, index, leader) if r != leader]
        if len(followers) < 2:
            return
        heir, stalled = self.rng.sample(followers, 2)
        away = self.rng.uniform(15.0, 25.0)
        taken = {leader, heir, stalled}
        if taken & self.down or not all(c.nodes[n].up for n in taken):
            return
        self.counts["takeover"] += 1
        self.down.update(taken)
        try:
            deadline = self.loop.time() + 5.0
            while self.loop.time() < deadline and not self._unconfirmed(topic, index, leader, heir):
                await asyncio.sleep(0.002)
            self.note("takeover", topic, index, f"crash {leader}, stall {stalled} for {away:.3f}", f"heir {heir}",
                      "at the worst moment" if self.loop.time() < deadline else "")
            c.pause(stalled)
            crashed = self._crash(leader, False)
            await asyncio.sleep(away)
            c.resume(stalled)
            await asyncio.sleep(self.rng.uniform(0.5, 3.0))
            if crashed:
                c.start(leader)
        finally:
            self.down.difference_update(taken)

    async def rejoin(self) -> None:
        """A follower rejoins a partition's ISR while its leader's requests to the controller are
        held up (one link cut one way: TCP delivers them when it heals), and crashes again before
        they arrive: the leader's AlterPartition names the incarnation that caught up, which the
        controller must refuse once another has registered (KIP-903, issue 23 item 3). The
        follower is cut off from its leader meanwhile, so it cannot fetch what its power loss
        took; once the request is through, the leader crashes.

        Timed on the brokers' state, as the issue's reproduction: the link is cut once the
        follower's first incarnation is registered and unfenced (a fenced one may not join an
        ISR), the follower loses power once its leader has asked for it, and the request goes
        through once the second incarnation is registered and unfenced -- before that, the
        controller refuses it for naming a broker that is not live, switch or no switch. Each
        wait is bounded, and the leader's heartbeats wait behind the cut too: held past its
        session (9 s), it is fenced and its request refused as well."""
        c = self.cluster
        quorum = self._quorum_leader()
        topic = self.rng.choice(TOPICS)
        index = self.rng.randrange(3)
        leader = self._leader_of(topic, index)
        if quorum is None or leader is None or leader == quorum:
            return
        followers = [r for r in self._replicas_of(topic, index, leader) if r not in (leader, quorum)]
        if not followers:
            return
        follower = self.rng.choice(followers)
        taken = {quorum, leader, follower}
        if taken & self.down or not all(c.nodes[n].up for n in taken):
            return
        lh, fh, qh = c.nodes[leader].host, c.nodes[follower].host, c.nodes[quorum].host
        first, second, after = self.rng.uniform(0.5, 1.5), self.rng.uniform(0.3, 1.0), self.rng.uniform(0.0, 0.5)
        self.counts["rejoin"] += 1
        self.down.update(taken)
        self.note("rejoin", topic, index, f"leader {leader}, follower {follower}, controller {quorum}",
                  f"{first:.3f} {second:.3f} {after:.3f}")

        def asked() -> bool:
            """The leader has asked the controller to add the follower (its maximal ISR names it)."""
            b = c.nodes[leader].broker
            p = b.topics.partition(topic, index) if b is not None else None
            return p is not None and p.is_leader and follower in p._state.maximal_isr

        try:
            before = self._registered(follower)
            if self._crash(follower, False):
                await asyncio.sleep(first)
                c.start(follower)
            if not await self._until(lambda: self._registered(follower) > before, 15.0):
                return
            self._cut([(lh, qh)])
            if not await self._until(asked, 5.0):
                self.note("rejoin", topic, index, "not asked for")
            self._cut([(lh, fh), (fh, lh)])
            before = self._registered(follower)
            if self._crash(follower, True):
                await asyncio.sleep(second)
                c.start(follower)
            back = await self._until(lambda: self._registered(follower) > before, 8.0)
            self.note("rejoin", topic, index, f"follower registered anew: {back}")
            await asyncio.sleep(after)
        finally:
            self._heal([(lh, qh)])
            try:
                await asyncio.sleep(self.rng.uniform(0.0, 0.5))
                crashed = self._crash(leader, False)
                await asyncio.sleep(self.rng.uniform(2.0, 5.0))
                self._heal([(lh, fh), (fh, lh)])
                if crashed:
                    c.start(leader)
            finally:
                self.down.difference_update(taken)

    async def flip(self) -> None:
        """Leadership of a coordinator's partition goes to a broker, away to another and back
        within moments, as an operator's preferred-leader elections (a rebalancing tool's, or
        Kafka's automatic leader rebalance) move it, while that broker's worker threads are slow
        (its load decodes a partition far larger than the simulation's) and the partition's third
        replica is cut off from it (in half the flips from the broker it moves away to as well:
        else that broker's answers reach the third replica while the first one's wait on the cut
        link, as the marker bug of seed 20 needed): the broker's work under the first election --
        the partition's load, a reaper's pass -- is still in flight when the third election makes
        it leader again, and that election's log cannot be committed while the third replica,
        unable to fetch, stays in the ISR (issue 23 items 8 and 9: the first election's work
        must stop, not carry into the new one's, nor finish it early). The other faults move
        leadership only by fencing a broker, seconds apart, by when such work is long done."""
        c = self.cluster
        topic = self.rng.choice((OFFSETS_TOPIC, TXN_TOPIC))
        index = self.rng.randrange(3)
        if topic == OFFSETS_TOPIC and (b := next((n.broker for n in c.nodes.values() if n.broker), None)):
            index = b.groups.partition_for(COPIER_GROUP)  # the one written to: the others hold no group
        leader = self._leader_of(topic, index)
        if leader is None:
            return
        replicas = self._replicas_of(topic, index, leader)
        if len(replicas) < 2:
            return
        home = self.rng.choice(replicas)
        away = self.rng.choice([r for r in replicas if r != home])
        third = next((r for r in replicas if r not in (home, away)), None)
        slow = (0.2, self.rng.uniform(1.0, 4.0))
        settle, gap, hold = self.rng.uniform(0.0, 0.5), self.rng.uniform(0.0, 2.0), self.rng.uniform(1.0, 8.0)
        if home in self.down or not c.nodes[home].up:
            return
        self.counts["flip"] += 1
        self.down.add(home)
        both = self.rng.random() < 0.5
        cut = [] if third is None else [c.nodes[n].host for n in ((home, away) if both else (home,))]
        pairs = [p for h in cut for p in ((h, c.nodes[third].host), (c.nodes[third].host, h))] if third else []
        self.note("flip", topic, index, f"to {home}, {away}, {home}", f"slow workers {slow}",
                  f"settle {settle:.3f}, gap {gap:.3f}", f"cut {third} from {'both' if both else home} until {hold:.3f} after")
        tp = TopicPartition(topic, index)

        def reading() -> bool:
            """`home` loads the partition, past the wait for its election's log to commit."""
            b = c.nodes[home].broker
            p = b.topics.partition(topic, index) if b is not None else None
            if b is None or p is None or not p.is_leader or p.high_watermark < p.leader_epoch_start_offset:
                return False
            return b.groups.is_loading(index) if topic == OFFSETS_TOPIC else index in b.txn._loading

        async def operate() -> None:
            admin = Admin(c.bootstrap, clock=SimClock(self.loop), request_timeout=5.0)

            async def lead(n: int) -> None:
                await self._lead(admin, "flip round", tp, [n, *(r for r in replicas if r != n)])

            try:
                async with asyncio.timeout(20.0):
                    await admin.start()
                    if leader == home:
                        await lead(away)  # so that `home` loads the partition anew
                    await lead(home)
                    deadline = self.loop.time() + 3.0
                    while not reading() and self.loop.time() < deadline:
                        await asyncio.sleep(0.002)
                    proc = c.nodes[home].proc
                    if proc is not None:
                        proc.worker_delay = slow
                    self._cut(pairs)
                    await asyncio.sleep(settle)
                    await lead(away)
                    await asyncio.sleep(gap)
                    await lead(home)
            except (KafkaClientError, TimeoutError, OSError) as e:  # an operator's tool gives up too
                self.note("flip stopped", topic, index, repr(e))
            finally:
                await admin.close()

        try:
            await self.loop.spawn(Process(f"client-operator{self.counts['flip']}", "10.0.1.201"), operate())
            await asyncio.sleep(hold)  # the third replica still cut off from the new election
        finally:
            self._heal(pairs)
            proc = c.nodes[home].proc
            if proc is not None:
                proc.worker_delay = None
            self.down.discard(home)

    async def app_pause(self) -> None:
        """An application stalls (a long GC pause, a frozen VM) and then goes on as if nothing
        happened: its transaction may time out meanwhile (10 s here), the coordinator's reaper
        aborts it and bumps the epoch, its group session may end; back, it meets all of that with
        requests of before. The zombie worker is one such application by design; this makes any
        of them one, at any moment, and lines transaction timeouts up with the brokers' faults."""
        apps = [p for p in self.apps() if p.alive and not p.paused]
        if not apps:
            return
        proc = self.rng.choice(apps)
        hold = self.rng.uniform(0.5, 15.0)
        self.counts["app-pause"] += 1
        self.note("app-pause", proc.name, f"for {hold:.3f}")
        self.loop.pause(proc)
        try:
            await asyncio.sleep(hold)
        finally:
            self.loop.resume(proc)
            self.note("app-resume", proc.name)

    async def reap_flip(self) -> None:
        """Two transactional applications stall mid-transaction past their timeout, their ids on two
        partitions of one coordinator; its reaper's abort of the first is held (a follower of that
        partition cut off from the coordinator, still in its ISR) while the second id's partition
        moves away and back, as an operator's preferred-leader elections move it, and loads again;
        the second application comes back meanwhile and ends its transaction; then the cut heals
        (issue 23 item 9: a reaper pass decides each id on the state it has when the pass gets to
        it -- a decision made before the reload must not be written after it). The faults
        otherwise line up a pass with two timed-out ids, a held write and a reload of another
        partition of the same coordinator too rarely to be seen (docs/simulation.md, item 9).

        At three brokers every partition has every broker as a replica; the second partition is
        reassigned to the coordinator and the quorum leader only, so that the cut holds the first
        partition's writes alone (and the coordinator keeps its session with the controller)."""
        c = self.cluster
        quorum = self._quorum_leader()
        ids = [(tid, proc) for tid, proc in self.txn_apps().items() if proc.alive and not proc.paused]
        others = [n for n in c.nodes if n != quorum and n not in self.down and c.nodes[n].up]
        if quorum is None or quorum in self.down or len(ids) < 2 or len(others) < 2:
            return
        (x, xproc), (y, yproc) = self.rng.sample(ids, 2)
        n_txn = c.config(c.nodes[quorum]).transaction_state_num_partitions
        px, py = partition_for(x, n_txn), partition_for(y, n_txn)
        coord, cut_off = self.rng.sample(others, 2)
        if px == py:
            return
        before = {px: self._replicas_of(TXN_TOPIC, px, self._leader_of(TXN_TOPIC, px) or coord),
                  py: self._replicas_of(TXN_TOPIC, py, self._leader_of(TXN_TOPIC, py) or coord)}
        gap, back, after = self.rng.uniform(0.0, 2.0), self.rng.uniform(0.2, 3.0), self.rng.uniform(0.5, 2.0)
        self.counts["reap-flip"] += 1
        taken = {coord, cut_off}
        self.down.update(taken)
        pairs = [(c.nodes[coord].host, c.nodes[cut_off].host), (c.nodes[cut_off].host, c.nodes[coord].host)]
        self.note("reap-flip", f"{x} on {TXN_TOPIC}-{px}, {y} on {TXN_TOPIC}-{py}", f"coordinator {coord}",
                  f"cut {cut_off}", f"quorum {quorum}", f"gap {gap:.3f}, back {back:.3f}, after {after:.3f}")

        def meta(tid: str) -> Any:
            """`tid` as the coordinator serves it (None while it does not)."""
            b = c.nodes[coord].broker
            return b.txn.machine.get(tid) if b is not None and b.txn.owns(tid) else None

        def ongoing(tid: str, since: int = -1) -> bool:
            m = meta(tid)
            return m is not None and m.state is TxnState.ONGOING and m.pending is None and m.start_ms >= since

        async def operate() -> None:
            admin = Admin(c.bootstrap, clock=SimClock(self.loop), request_timeout=5.0)

            async def lead(index: int, order: list[int]) -> None:
                await self._lead(admin, "reap-flip round", TopicPartition(TXN_TOPIC, index), order)

            paused: list[Process] = []

            async def stall(tid: str, proc: Process, since: int) -> bool:
                """Pause `proc` in a transaction of `tid` begun at `since` or later, with no end of
                it on its way (one sent just before the pause would end it)."""
                deadline = self.loop.time() + 10.0
                while await self._until(lambda: ongoing(tid, since), deadline - self.loop.time()):
                    start = meta(tid).start_ms
                    self.loop.pause(proc)
                    await asyncio.sleep(0.05)
                    if ongoing(tid, start) and meta(tid).start_ms == start:
                        paused.append(proc)
                        return True
                    self.loop.resume(proc)
                    await asyncio.sleep(0.01)
                return False
            try:
                async with asyncio.timeout(60.0):
                    await admin.start()
                    await lead(px, [coord, cut_off, quorum])
                    await lead(py, [coord, quorum])
                    # The second id first: its timeout is then no later than the first's.
                    if not await stall(y, yproc, -1) or not await stall(x, xproc, meta(y).start_ms):
                        return
                    self._cut(pairs)
                    held = await self._until(lambda: (m := meta(x)) is not None and m.pending is TxnState.PREPARE_EPOCH_FENCE, 20.0)
                    self.note("reap-flip", x, "abort held" if held else "not aborted")
                    if not held:
                        return
                    await lead(py, [quorum, coord])
                    await asyncio.sleep(gap)
                    await lead(py, [coord, quorum])
                    await self._until(lambda: meta(y) is not None, 5.0)
                    self.loop.resume(yproc)
                    paused.remove(yproc)
                    self.note("app-resume", yproc.name)
                    await asyncio.sleep(back)
                    self._heal(pairs)
                    await asyncio.sleep(after)
            except (KafkaClientError, TimeoutError, OSError) as e:  # an operator's tool gives up too
                self.note("reap-flip stopped", repr(e))
            finally:
                self._heal(pairs)
                for proc in paused:
                    self.loop.resume(proc)
                    self.note("app-resume", proc.name)
                try:  # the replicas as they were (the leaders stay where they are)
                    async with asyncio.timeout(10.0):
                        await admin.alter_partition_reassignments(
                            {TopicPartition(TXN_TOPIC, i): r for i, r in before.items() if r}, timeout=5.0)
                except (KafkaClientError, TimeoutError, OSError) as e:
                    self.note("reap-flip restore stopped", repr(e))
                await admin.close()

        try:
            await self.loop.spawn(Process(f"client-operator-reap{self.counts['reap-flip']}", "10.0.1.202"), operate())
        finally:
            self.down.difference_update(taken)

    async def _lead(self, admin: Admin, label: str, tp: TopicPartition, order: list[int]) -> None:
        """An operator's move: the replicas reordered (or changed) to `order`, then a preferred-leader
        election, so that `order[0]` leads."""
        moved = await admin.alter_partition_reassignments({tp: order}, timeout=5.0)
        elected = await admin.elect_leaders([tp], timeout=5.0)
        self.note(label, tp.topic, tp.partition, order, moved[tp], elected.get(tp))

    async def _until(self, what: Callable[[], bool], within: float) -> bool:
        """Wait (in steps of 2 virtual ms) until `what` holds; False if it did not within `within` s."""
        deadline = self.loop.time() + within
        while not what():
            if self.loop.time() >= deadline:
                return False
            await asyncio.sleep(0.002)
        return True

    def _image(self) -> Any:
        """The most advanced metadata image among the live brokers (None if none runs)."""
        images = [node.broker.controller.image for node in self.cluster.nodes.values()
                  if node.up and node.broker is not None]
        return max(images, key=lambda i: i.offset) if images else None

    def _registered(self, n: int) -> int:
        """`n`'s broker epoch if it is registered and unfenced now, else -1."""
        image = self._image()
        b = image.broker(n) if image is not None else None
        return b.epoch if b is not None and not b.fenced else -1

    def _cut(self, pairs: list[tuple[str, str]]) -> None:
        self.note("cut", pairs)
        self.loop.net.cut_links(pairs)

    def _heal(self, pairs: list[tuple[str, str]]) -> None:
        for p in pairs:
            self.loop.net.cut.discard(p)
        self.loop.net.heal_held()
        self.note("heal", pairs)

    def _unconfirmed(self, topic: str, index: int, leader: int, heir: int) -> bool:
        """Whether `heir` holds a record its leader has confirmed and it has not learnt is."""
        lb, hb = self.cluster.nodes[leader].broker, self.cluster.nodes[heir].broker
        if lb is None or hb is None:
            return False
        lt, ht = lb.topics.get(topic), hb.topics.get(topic)
        lp = lt.local.get(index) if lt is not None else None
        hp = ht.local.get(index) if ht is not None else None
        if lp is None or hp is None or not lp.is_leader:
            return False
        if not hp.high_watermark < hp.log_end_offset <= lp.high_watermark:
            return False
        r = hp.read(hp.high_watermark, 1 << 20, Isolation.LOG_END)
        for h, records in decode_batches(r.records):
            for rec in records if not h.is_control else ():
                if rec.value is not None and decode_value(rec.value).state is TxnState.PREPARE_COMMIT:
                    return True
        return False

    def _slow(self, n: int, delay: tuple[float, float] | None) -> None:
        proc = self.cluster.nodes[n].proc
        if proc is not None:
            proc.disk_delay = delay or (0.0, 0.002)

    def _crash(self, n: int, power_loss: bool) -> bool:
        """SIGKILL, or a power loss -- unless another crash is not behind the cluster yet.

        Acknowledged writes are promised to survive while one in-sync replica keeps them, and no
        replica fsyncs them (Kafka's default, and Ketch's): a power loss takes a replica's copy
        until it has fetched it again. And a broker back from any crash counts as having lost its
        log's tail (KIP-966: the controller cannot tell a SIGKILL from a power cut), so it leaves
        the eligible leaders. A power loss while another crashed broker is not back in the ISR of
        each of its partitions may therefore take the last copy the controller trusts, which no
        guarantee covers: it is then only a process crash (the page cache survives). A kill while
        a powered-off broker is not back is inside the promise (seed 314: the controller's
        recovery election picks the longest log among the replicas, KIP-966). Always True
        now (callers still ask: a crash that was not done does not restart)."""
        self.crashed = {m for m in self.crashed if not self._in_every_isr(m)}
        if power_loss and self.crashed - {n}:
            self.note("power loss of", n, "as a process crash: not yet back in every ISR:", sorted(self.crashed))
            power_loss = False
        self.crashed.add(n)
        self.cluster.kill(n, power_loss=power_loss)
        return True

    def _in_every_isr(self, n: int) -> bool:
        """Whether `n` serves and is in the ISR of every partition it replicates, as the most
        advanced live broker's metadata has them (a partition without a leader counts: `n` is
        not back while one waits for another replica)."""
        if not self.cluster.nodes[n].serving:
            return False
        image = self._image()
        if image is None:
            return False
        return all(n in p.isr for t in image.topics.values() for p in t.partitions if n in p.replicas)

    def heal(self) -> None:
        """End of the faults: every node up and running, every link whole."""
        for t in self.held:
            t.cancel()
        c = self.cluster
        c.loop.net.cut.clear()
        c.loop.net.heal_held()
        for n, node in c.nodes.items():
            if node.proc is not None and node.proc.paused:
                c.resume(n)
            if not node.up:
                c.start(n)
            elif node.proc is not None:
                node.proc.disk_delay, node.proc.worker_delay = (0.0, 0.002), None
        for proc in self.apps():
            if proc.paused:
                self.loop.resume(proc)
        self.note("healed")

    def summary(self) -> dict[str, Any]:
        return dict(self.counts)
