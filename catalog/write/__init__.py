"""Writing a dataset: the partitioned writer, sorting, deletes by predicate."""
