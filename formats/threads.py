"""Thread pools kept for a process's life: made on first use, made again in a forked child
(whose copy of the parent's pool has no threads behind it). Making a pool per call costs a
thread start per task (milliseconds on a busy machine, per commit)."""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

_POOLS: "weakref.WeakSet[LazyPool]" = weakref.WeakSet()


class LazyPool:
    """A :class:`ThreadPoolExecutor` of ``workers`` threads named ``name``, made when first used."""

    def __init__(self, workers: int, name: str):
        self.workers, self.name = workers, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        _POOLS.add(self)

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=self.name)
            return self._pool

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()


def _after_fork() -> None:
    for pool in list(_POOLS):
        pool._forget()


os.register_at_fork(after_in_child=_after_fork)

# the threads decoding index files and encoding data files, shared: each thread keeps the
# memory its allocations freed (allocator heaps per thread), so fewer threads hold less. A
# task on them must not wait for another task on them.
WORKERS = LazyPool(max(2, min(8, os.cpu_count() or 2)), "cdkds-work")
