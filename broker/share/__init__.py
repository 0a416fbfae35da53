"""KIP-932 share groups on the partition leader: the share-partitions' state (partition_state.py,
sans-IO), the share sessions of ShareFetch/ShareAcknowledge (sessions.py) and the shell that reads
the log for them and keeps their state durable through the share coordinator (manager.py)."""
