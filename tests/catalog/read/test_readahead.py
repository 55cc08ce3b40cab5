"""Reading ahead: order kept, errors raised in turn, readers stopped when the consumer stops."""

import threading
import time

import pytest

from cdkds.catalog.read.readahead import read_ahead


def _reader(name, n, log=None, fail_at=None):
    def read():
        for i in range(n):
            if i == fail_at:
                raise OSError(f"{name} broke")
            if log is not None:
                log.append((name, i))
            yield (name, i)
    return read


@pytest.mark.parametrize("depth", [1, 2, 3, 8])
def test_items_come_in_the_readers_order(depth):
    readers = [_reader(f"r{k}", k % 4) for k in range(10)]
    assert list(read_ahead(readers, depth)) == [(f"r{k}", i) for k in range(10) for i in range(k % 4)]


def test_an_error_is_raised_in_its_turn():
    out = []
    with pytest.raises(OSError, match="r1 broke"):
        for item in read_ahead([_reader("r0", 3), _reader("r1", 3, fail_at=1), _reader("r2", 3)], 3):
            out.append(item)
    assert out == [("r0", 0), ("r0", 1), ("r0", 2), ("r1", 0)]


def test_closing_stops_the_readers_and_memory_stays_bounded():
    log = []
    scan = read_ahead([_reader(f"r{k}", 1000, log) for k in range(20)], depth=3, buffered=2)
    assert next(scan) == ("r0", 0)
    time.sleep(0.2)
    # three readers in flight, each at most a few items ahead of what was taken
    assert {name for name, _ in log} <= {"r0", "r1", "r2"} and len(log) <= 3 * 4
    scan.close()
    before = threading.active_count()
    time.sleep(0.2)
    assert not any(t.name.startswith("cdkds-read-ahead") for t in threading.enumerate())
    assert threading.active_count() <= before


def test_a_scan_left_open_does_not_keep_python_from_exiting(tmp_path):
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import pyarrow as pa
        from cdkds.catalog import DatasetDescriptor, DatasetRepository
        ds = DatasetRepository({str(tmp_path)!r}).create("t", DatasetDescriptor(
            {{"type": "record", "name": "R", "fields": [{{"name": "x", "type": "long"}}]}}))
        for i in range(5):
            with ds.writer() as w:
                w.write_batch(pa.table({{"x": list(range(i * 10, i * 10 + 10))}}))
        scan = ds.refresh().scan(batch_rows=2)  # a global: never closed before the interpreter exits
        print(next(scan).num_rows)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, None])
def test_batch_rows_is_checked_before_reading(tmp_path, bad):
    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.catalog.errors import CdkdsError

    ds = DatasetRepository(str(tmp_path)).create("t", DatasetDescriptor(
        {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}))
    for read in (ds.scan, ds.to_batch_reader):
        with pytest.raises(CdkdsError, match=f"dataset 't': batch_rows must be a positive whole number of rows, "
                                             f"got {bad!r}"):
            read(batch_rows=bad)


def _slow_reader(name, n, pause):
    def read():
        try:
            for i in range(n):
                time.sleep(pause)  # stands for a read inside Arrow, outside Python's lock
                yield (name, i)
        finally:
            print(f"{name} closed", flush=True)
    return read


def test_at_exit_the_readers_finish_their_item_and_close_before_python_tears_down():
    """A reader thread frozen inside Arrow when the interpreter tears down aborted the process
    (issue 25.8): Python must wait for each reader to leave the item it is reading."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import time
        from cdkds.catalog.read.readahead import read_ahead
        from tests.catalog.read.test_readahead import _slow_reader
        scan = read_ahead([_slow_reader(f"r{k}", 50, 0.1 + 0.2 * k) for k in range(3)], depth=3, buffered=1)
        print(next(scan), flush=True)  # scan left open: the readers are in the middle of an item
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")[1:-1]) == ["r0 closed", "r1 closed", "r2 closed"], done.stdout


def test_closing_a_batch_reader_stops_its_reading_at_once(tmp_path):
    import gc

    import pyarrow as pa

    from cdkds.catalog import DatasetDescriptor, DatasetRepository

    ds = DatasetRepository(str(tmp_path)).create("t", DatasetDescriptor(
        {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}))
    for i in range(6):
        with ds.writer() as w:
            w.write_batch(pa.table({"x": list(range(i * 10, i * 10 + 10))}))
    gc.disable()  # only close() may stop the reading, not a collection
    try:
        for open_reader in (lambda: ds.refresh().to_batch_reader(batch_rows=2), lambda: ds.changes(1)):
            reader = open_reader()
            reader.read_next_batch()
            reader.close()
            assert not [t for t in threading.enumerate() if t.name.startswith("cdkds-read-ahead")]
            with pytest.raises(Exception):
                reader.read_next_batch()
    finally:
        gc.enable()


def test_a_thread_still_reading_after_the_main_thread_ended_gets_every_item():
    """Python waits for the threads that are not daemons: the readers keep serving one of them."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import threading, time
        from cdkds.catalog.read.readahead import read_ahead
        from tests.catalog.read.test_readahead import _reader

        def consume():
            scan = read_ahead([_reader(f"r{k}", 20) for k in range(6)], depth=3, buffered=1)
            next(scan)  # the readers are running
            time.sleep(0.3)  # and the main thread has ended by now
            print(1 + len(list(scan)), flush=True)

        threading.Thread(target=consume).start()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "120", (done.stdout, done.stderr)
