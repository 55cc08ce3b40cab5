"""Reading the next files of a scan while the current one is consumed.

A scan's files are read one after another by default; on an object store most of that
time is waiting for bytes, and even on a local disk Parquet decoding (which releases the
GIL) can run beside the consumer. :func:`read_ahead` runs up to ``depth`` file readers
in threads, each a few batches ahead, and yields their batches in the files' order, so
memory stays bounded by ``depth`` x ``buffered`` batches.

The reader threads are not daemons: a daemon thread is frozen wherever it is when the
interpreter tears down, and one frozen inside Arrow (or with Arrow's threads working for it
on a Python file) aborted the process as it exited. Instead they stop once no one will take
their items — the iterator is closed or collected, or Python is exiting and the thread that
reads the iterator has finished (it is the main thread, a daemon, or gone) — each after the
item it is reading, and Python waits for them before it tears down.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

READ_AHEAD = 3  # files in flight: the one being consumed and two more
BUFFERED = 2  # batches a reader may hold ready before it waits

POLL_SECONDS = 0.05  # how soon an idle or blocked reader thread notices that no one will take its items

_ITEM, _DONE, _ERROR = range(3)


def _exiting(consumer: threading.Thread) -> bool:
    """Whether Python is exiting and ``consumer`` will read no more: the main thread has
    finished (Python then waits for the threads that are not daemons) and the consumer is
    the main thread, a daemon (frozen at teardown) or has ended."""
    main = threading.main_thread()
    return not main.is_alive() and (consumer is main or consumer.daemon or not consumer.is_alive())


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
    consumer = threading.current_thread()
    pending: collections.deque[queue.Queue] = collections.deque()
    work: queue.Queue = queue.Queue()  # (reader, its queue) for the workers; None: stop

    def abandoned() -> bool:
        return stop.is_set() or _exiting(consumer)

    def put(q: queue.Queue, message: tuple) -> bool:
        while not abandoned():
            try:
                q.put(message, timeout=POLL_SECONDS)
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
        while not abandoned():
            try:
                job = work.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if job is None:
                return
            run(*job)

    def start_next() -> None:
        reader = next(readers, None)
        if reader is not None:
            q: queue.Queue = queue.Queue(buffered)
            pending.append(q)
            work.put((reader, q))

    workers = [threading.Thread(target=work_on, name="cdkds-read-ahead", daemon=False) for _ in range(depth)]
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
