"""What must hold of the brokers' own state at every step of a simulated run.

The history checker judges what clients saw; these judge what the brokers hold, so a violation is
caught the moment it happens, with the step that made it, and not only if a client happened to
read the damage. Checked from outside the brokers (a harness task that belongs to no simulated
process) through Partition's read-only surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.server import BrokerServer


@dataclass
class Invariants:
    violations: list[str] = field(default_factory=list)
    # (topic, partition, leader epoch) -> the node that led at that epoch
    leaders: dict[tuple[str, int, int], int] = field(default_factory=dict)
    # (node, incarnation, topic, partition, leader epoch) -> the highest HW seen there as leader
    hw: dict[tuple[int, int, str, int, int], int] = field(default_factory=dict)

    def fail(self, now: float, what: str) -> None:
        if len(self.violations) < 100:
            self.violations.append(f"t={now:.3f} {what}")

    def check(self, now: float, brokers: list[tuple[int, int, BrokerServer]]) -> None:
        """`brokers`: (node id, incarnation, server) of every live broker."""
        for node, inc, b in brokers:
            for topic in list(b.topics.by_name.values()):
                for index, p in list(topic.local.items()):
                    if not p.is_leader:
                        continue
                    epoch = p.leader_epoch
                    key = (topic.name, index, epoch)
                    other = self.leaders.setdefault(key, node)
                    if other != node:
                        self.fail(now, f"two leaders of {topic.name}-{index} at leader epoch {epoch}: "
                                       f"nodes {other} and {node}")
                    hw = p.high_watermark
                    hkey = (node, inc, topic.name, index, epoch)
                    before = self.hw.get(hkey, -1)
                    if hw < before:
                        self.fail(now, f"the high watermark of {topic.name}-{index} moved back on leader {node} "
                                       f"(epoch {epoch}): {before} -> {hw}")
                    self.hw[hkey] = max(before, hw)
                    lso = p.last_stable_offset
                    if lso > hw:
                        self.fail(now, f"LSO {lso} above HW {hw} on {topic.name}-{index} (leader {node})")
                    if hw > p.log_end_offset:
                        self.fail(now, f"HW {hw} above the log end {p.log_end_offset} on {topic.name}-{index} "
                                       f"(leader {node})")
