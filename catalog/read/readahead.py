"""Reading the next files of a scan while the current one is consumed.

A scan's files are read one after another by default; on an object store most of that
time is waiting for bytes, and even on a local disk Parquet decoding (which releases the
GIL) can run beside the consumer. :func:`read_ahead` runs up to ``depth`` file readers
in threads, each a few batches ahead, and yields their batches in the files' order, so
memory stays bounded by ``depth`` x ``buffered`` batches.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

READ_AHEAD = 3  # files in flight: the one being consumed and two more
BUFFERED = 2  # batches a reader may hold ready before it waits

_ITEM, _DONE, _ERROR = range(3)


def read_ahead(readers: Iterable[Callable[[], Iterator[T]]], depth: int = READ_AHEAD,
               buffered: int = BUFFERED) -> Iterator[T]:
    """The items of each reader in turn, readers run ahead in up to ``depth`` threads.
    A reader's error is raised when its turn comes; closing the iterator stops them all."""
    readers = iter(readers)
    if depth <= 1:
        for reader in readers:
            yield from reader()
        return
    stop = threading.Event()
    pending: collections.deque[queue.Queue] = collections.deque()
    work: queue.Queue = queue.Queue()  # (reader, its queue) for the workers; None: stop

    def put(q: queue.Queue, message: tuple) -> bool:
        while not stop.is_set():
            try:
                q.put(message, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run(reader: Callable[[], Iterator[T]], q: queue.Queue) -> None:
        try:
            items = reader()
            try:
                for item in items:
                    if not put(q, (_ITEM, item)):
                        return
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
            put(q, (_DONE, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised in its turn
            put(q, (_ERROR, e))

    def work_on() -> None:
        while (job := work.get()) is not None and not stop.is_set():
            run(*job)

    def start_next() -> None:
        reader = next(readers, None)
        if reader is not None:
            q: queue.Queue = queue.Queue(buffered)
            pending.append(q)
            work.put((reader, q))

    # daemon threads: a scan left unfinished (never closed) must not keep Python from exiting
    workers = [threading.Thread(target=work_on, name="cdkds-read-ahead", daemon=True) for _ in range(depth)]
    for worker in workers:
        worker.start()
    try:
        for _ in range(depth):
            start_next()
        while pending:
            kind, value = pending[0].get()
            if kind == _ITEM:
                yield value
            elif kind == _DONE:
                pending.popleft()
                start_next()
            else:
                raise value
    finally:
        stop.set()
        for _ in workers:
            work.put(None)
        for worker in workers:
            worker.join()
