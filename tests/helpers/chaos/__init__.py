"""Chaos suite machinery: network namespaces, nemesis, workloads, history checker."""
