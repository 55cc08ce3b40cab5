"""Keyed datasets: record keys, the record-level index, deletion vectors and
last-write-wins reconciliation (upsert, insert, update, delete by key, TTL)."""
