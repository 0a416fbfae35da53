"""Whether the compat suites run against one broker or a 3-broker cluster (`make compat-cluster`)."""

from __future__ import annotations

import os

CLUSTER = os.environ.get("KETCH_COMPAT_CLUSTER") == "1"
# For clients that cannot ask for the broker's default replication factor (aiokafka refuses -1).
REPLICATION_FACTOR = 3 if CLUSTER else 1
