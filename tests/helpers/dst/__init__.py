"""The deterministic simulation of the whole cluster (issue 26): virtual time, network and disk."""
