"""A least-recently-used cache bounded by the size of what it holds, for what reads of
immutable files keep between reads (footers, deleted positions). Thread-safe, and safe in a
forked child: a lock a parent's thread held at the fork stays held there (that thread is not
in the child), so every cache takes a new lock after a fork; what it holds stays valid."""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

_CACHES: "weakref.WeakSet[BoundedCache]" = weakref.WeakSet()


class BoundedCache(Generic[V]):
    """At most ``capacity`` of ``size(value)`` units of values by key, least recently used
    out (the newest always stays, whatever its size)."""

    def __init__(self, capacity: int, size: Callable[[V], int]):
        self._capacity = capacity
        self._size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        _CACHES.add(self)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: Hashable, value: V, replace: bool = False) -> None:
        """Holds ``value`` for ``key``; a value held already stays unless ``replace``."""
        with self._lock:
            if key in self._items:
                if not replace:
                    return
                self._bytes -= self._size(self._items.pop(key))
            self._items[key] = value
            self._bytes += self._size(value)
            while self._bytes > self._capacity and len(self._items) > 1:
                self._bytes -= self._size(self._items.popitem(last=False)[1])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _after_fork() -> None:
    for cache in list(_CACHES):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
