"""Thread pools kept for a process's life, made again in a forked child."""

from __future__ import annotations

import multiprocessing

from cdkds.formats.threads import LazyPool

POOL = LazyPool(2, "cdkds-test")


def _in_child(queue) -> None:
    queue.put(POOL.get().submit(lambda: 41 + 1).result(timeout=10))


def test_one_pool_for_the_process_and_a_new_one_in_a_forked_child():
    first = POOL.get()
    assert POOL.get() is first and first.submit(lambda: 1).result() == 1
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and queue.get(timeout=5) == 42  # the parent's pool has no threads there
