"""The cluster's metadata as every broker sees it: the committed metadata log applied to an image."""
