"""The active controller: decisions about the cluster's metadata, taken on the quorum leader."""
