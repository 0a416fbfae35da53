"""The metadata quorum: a Raft core in KRaft's shape (node.py, sans-IO) and its messages.

node.py decides; the shell that persists, sends and ticks it on the controller listener comes
with the cluster (docs/cluster.md). tests/sim/ drives node.py through faults, deterministically.
"""
