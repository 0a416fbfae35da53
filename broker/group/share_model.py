"""The nouns of KIP-932 share groups, as the group coordinator holds them (share.py decides).

A share group's members are assigned partitions with no revocation step: a partition may be held by
many members at once (each record still goes to one of them: the partition leader's share-partition
hands out records, not the coordinator), so a member takes its target at once."""

from __future__ import annotations

from dataclasses import dataclass, field

from .assignors import Assignment, TopicMeta


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = frozenset()


@dataclass(slots=True)
class ShareGroupData:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMeta] = field(default_factory=dict)

    def state(self) -> str:
        """Kafka's ShareGroupState names."""
        return "Stable" if self.members else "Empty"
