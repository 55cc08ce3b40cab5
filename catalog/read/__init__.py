"""Reading a dataset: planning a scan (pruning, splits), read-ahead, the Arrow dataset hand-off, the change feed."""
