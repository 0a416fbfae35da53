"""Three brokers in one metadata quorum, for the tests of this folder that need no other settings
(a module overrides `cluster` when it does)."""

from __future__ import annotations

import pytest
from helpers.cluster import Cluster
from helpers.cluster_metadata import SHORT_SESSION, listed_everywhere, voters_for


@pytest.fixture
def cluster(cluster_factory) -> Cluster:  # type: ignore[no-untyped-def]
    voters = voters_for(3)
    c: Cluster = cluster_factory(3, args_for=lambda c, n: ["--voters", voters],
                                 env=SHORT_SESSION)
    listed_everywhere(c)
    return c
