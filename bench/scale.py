"""How the log scales with the number of files (issue 32's "before"): one dataset partitioned
by ``identity(p)`` (1,000 values of ``p``) holding N data files added in one commit, then a
checkpoint, on file://; side by side with a delta-rs table and a pyiceberg (SQLite catalog)
table of the same N files. Not part of the test suite.

    python bench/scale.py [--files 10000,100000] [--runs 3] [--appends 12]
                          [--only cdkds,delta,iceberg,iceberg-split] [--profile 100000] [--root DIR] [--keep]
    python bench/scale.py --table     # the table of bench/results-scale.json
    python bench/scale.py --files 1000000 --only cdkds --runs 1 --profile 0     # the 1M case (~14 min)

Building: each system gets 1,000 real one-row Parquet files (one a partition; cdkds's written
by cdkds, the others' by pyarrow), and its N files are *hard links* to them at N distinct
paths, committed in one commit (cdkds: one commit of N Add actions, then ``ds.checkpoint()``;
Delta: a version-0 JSON of N add actions, then delta-rs's ``create_checkpoint()``; Iceberg: one
``fast_append`` of N DataFiles; "iceberg-split": the same files in 100 fast appends of 10
partitions each, so that manifests' partition summaries can be pruned). Every path exists and
is readable; only the bytes are shared.

Measuring: open, open + plan of ``p = x`` and open + full plan each run in a fresh process
(``--runs`` of them, the median shown; the OS page cache is warm, the process's caches are
not). "load + append one row" is the median of ``--appends`` load-then-append rounds in one
process, each loading anew (cdkds's load and append are also printed apart); "checkpoint
write" is ``ds.checkpoint()`` on a dataset just loaded after an append (so the checkpoint is
new). "snapshot memory" is what a loaded snapshot keeps once a full plan has read every
checkpoint part — the Python heap (tracemalloc) plus Arrow's buffers
(``pa.total_allocated_bytes``), in a fresh process — and the RSS growth of that, per file.
Inline table services are off (``CDKDS_INLINE_SERVICES=off``), so an append is only its commit
(bench/append.py measures appends with them on and off).
Writes bench/results-scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CDKDS_INLINE_SERVICES", "off")

PARTITIONS = 1000
POINT = "p0500"
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "v", "type": "double"}]}
NAME = "events"
SYSTEMS = ("cdkds", "delta", "iceberg", "iceberg-split")
SPLIT_COMMITS = 100  # "iceberg-split": the same files in 100 commits, each of 10 partitions' files


def partition_value(i: int) -> str:
    return f"p{i % PARTITIONS:04d}"


def one_row(i: int) -> dict:
    return {"id": i, "p": partition_value(i), "v": i / 2}


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def link(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.link(source, target)


def pyarrow_templates(folder: Path) -> dict[str, str]:
    """One one-row Parquet file a partition, written by pyarrow (for Delta and Iceberg)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for i in range(PARTITIONS):
        path = str(folder / f"{partition_value(i)}.parquet")
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "p": [partition_value(i)], "v": [i / 2]}), path)
        out[partition_value(i)] = path
    return out


# ------------------------------------------------------------------------------------ building

def build_cdkds(root: Path, n: int) -> dict:
    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.catalog.log.actions import AddFile
    from cdkds.catalog.log.conflicts import BlindAppend
    repo = DatasetRepository(f"file://{root}")
    templates = repo.create("templates", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)"))
    with templates.writer() as w:
        for i in range(PARTITIONS):
            w.write(one_row(i))
    by_value = {f.partition["p_copy"]: f for f in templates.files}
    ds = repo.create(NAME, DatasetDescriptor(SCHEMA, partition_strategy="identity(p)"))
    start = time.perf_counter()
    adds = []
    for i in range(n):
        t = by_value[partition_value(i)]
        path = f"data/p_copy={partition_value(i)}/gen-{i:07d}.parquet"
        link(str(root / "templates" / t.path), str(root / NAME / path))
        adds.append(AddFile(path, t.partition, t.size, t.row_count, t.statistics, t.schema_version))
    linked = time.perf_counter() - start
    start = time.perf_counter()
    ds._commit("append", adds, rule=BlindAppend())
    committed = time.perf_counter() - start
    start = time.perf_counter()
    ds.checkpoint()
    checkpointed = time.perf_counter() - start
    (checkpoint,) = (root / NAME / "_log").glob("*.checkpoint.parquet")
    return {"link_s": round(linked, 2), "commit_s": round(committed, 2), "checkpoint_s": round(checkpointed, 2),
            "checkpoint_bytes": checkpoint.stat().st_size,
            "commit_bytes": sum(f.stat().st_size for f in (root / NAME / "_log").glob("*.json"))}


def build_delta(root: Path, n: int, templates: dict[str, str]) -> dict:
    from deltalake import DeltaTable
    table = root / "delta"
    (table / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        {"name": "v", "type": "double", "nullable": True, "metadata": {}}]}
    now = int(time.time() * 1000)
    lines = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
             {"metaData": {"id": "00000000-0000-0000-0000-000000000032", "format": {"provider": "parquet", "options": {}},
                           "schemaString": json.dumps(schema), "partitionColumns": ["p"], "configuration": {},
                           "createdTime": now}},
             {"commitInfo": {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}}}]
    start = time.perf_counter()
    sizes = {v: os.path.getsize(p) for v, p in templates.items()}
    for i in range(n):
        value = partition_value(i)
        path = f"p={value}/gen-{i:07d}.parquet"
        link(templates[value], str(table / path))
        k = i % PARTITIONS
        stats = {"numRecords": 1, "minValues": {"id": k, "v": k / 2}, "maxValues": {"id": k, "v": k / 2},
                 "nullCount": {"id": 0, "v": 0}}
        lines.append({"add": {"path": path, "partitionValues": {"p": value}, "size": sizes[value],
                              "modificationTime": now, "dataChange": True, "stats": json.dumps(stats)}})
    (table / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    linked = time.perf_counter() - start
    start = time.perf_counter()
    DeltaTable(str(table)).create_checkpoint()
    checkpointed = time.perf_counter() - start
    (checkpoint,) = (table / "_delta_log").glob("*.checkpoint.parquet")
    return {"link_and_log_s": round(linked, 2), "checkpoint_s": round(checkpointed, 2),
            "checkpoint_bytes": checkpoint.stat().st_size}


def iceberg_catalog(root: Path, folder: str = "iceberg"):
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog("bench", uri=f"sqlite:///{root}/{folder}/catalog.db", warehouse=f"file://{root}/{folder}")


def build_iceberg(root: Path, n: int, templates: dict[str, str], folder: str = "iceberg", commits: int = 1) -> dict:
    """``commits`` fast appends, each of the files of a contiguous range of partitions
    (so each manifest's partition summary bounds a range: a point query can skip the others)."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType
    (root / folder).mkdir(parents=True)
    catalog = iceberg_catalog(root, folder)
    catalog.create_namespace("bench")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "p", StringType()),
                    NestedField(3, "v", DoubleType()))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
    table = catalog.create_table("bench.events", schema=schema, partition_spec=spec)
    location = table.location().removeprefix("file://")
    start = time.perf_counter()
    data_files = {}
    for value, path in templates.items():
        target = f"{location}/data/p={value}/template.parquet"
        link(path, target)
        data_files[value] = parquet_file_to_data_file(table.io, table.metadata, f"file://{target}")
    files: list[list] = [[] for _ in range(commits)]
    for i in range(n):
        value = partition_value(i)
        path = f"{location}/data/p={value}/gen-{i:07d}.parquet"
        link(templates[value], path)
        file = DataFile(*data_files[value]._data)
        file[1] = f"file://{path}"
        files[(i % PARTITIONS) * commits // PARTITIONS].append(file)
    linked = time.perf_counter() - start
    start = time.perf_counter()
    for group in files:
        with table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for file in group:
                    append.append_data_file(file)
    return {"link_s": round(linked, 2), "fast_append_s": round(time.perf_counter() - start, 2), "commits": commits}


# ------------------------------------------------------------------------------------ measuring (in a child process)

def measure(system: str, what: str, root: Path, n: int, appends: int) -> dict:
    """One measurement in this (fresh) process."""
    if system == "cdkds":
        from cdkds.catalog import DatasetRepository
        url = f"file://{root}"
        if what == "memory":
            import tracemalloc
            DatasetRepository(url).load("templates")  # the modules a load imports, before measuring
            before = rss()
            assert len(DatasetRepository(url).load(NAME).plan().tasks) == n  # the RSS growth; the heap: a second load
            grown = rss() - before
            import pyarrow as pa
            tracemalloc.start()
            base, arrow = tracemalloc.get_traced_memory()[0], pa.total_allocated_bytes()
            ds = DatasetRepository(url).load(NAME)
            assert len(ds.plan().tasks) == n  # every part read: the whole snapshot in memory
            kept, peak = tracemalloc.get_traced_memory()
            columns = pa.total_allocated_bytes() - arrow  # Arrow's buffers, which tracemalloc does not see
            return {"heap_bytes_per_file": (kept - base + columns) / n, "python_heap_bytes_per_file": (kept - base) / n,
                    "arrow_bytes_per_file": columns / n, "peak_heap_bytes_per_file": (peak - base) / n,
                    "rss_bytes_per_file": grown / n}
        if what == "profile":  # the load, the point plan and the full plan, each profiled on its own
            import cProfile
            import io
            import pstats

            import cdkds
            out = {}
            ds = None
            steps = {"load": lambda: DatasetRepository(url).load(NAME), "point": lambda: ds.plan(f"p = '{POINT}'"),
                     "full": lambda: ds.plan()}
            for step, call in steps.items():
                profile = cProfile.Profile()
                profile.enable()
                made = call()
                profile.disable()
                ds = made if step == "load" else ds
                for key in ("tottime", "cumulative"):
                    text = io.StringIO()
                    pstats.Stats(profile, stream=text).sort_stats(key).print_stats(14)
                    out[f"{step}_{key}"] = text.getvalue().replace(str(Path(cdkds.__file__).parents[1]) + "/", "")
            return out
        start = time.perf_counter()
        ds = DatasetRepository(url).load(NAME)
        if what == "point":
            files = len(ds.plan(f"p = '{POINT}'").tasks)
            assert files == n // PARTITIONS, files
        elif what == "full":
            assert len(ds.plan().tasks) == n
        elif what == "append":
            times, loads = [], []
            for i in range(appends):
                start = time.perf_counter()
                ds = DatasetRepository(url).load(NAME)
                loads.append(time.perf_counter() - start)
                with ds.writer() as w:
                    w.write(one_row(i))
                times.append(time.perf_counter() - start)
            ds = DatasetRepository(url).load(NAME)
            with ds.writer() as w:
                w.write(one_row(appends))
            ds = DatasetRepository(url).load(NAME)
            start = time.perf_counter()
            ds.checkpoint()
            return {"append_s": statistics.median(times), "appends": times, "checkpoint_s": time.perf_counter() - start,
                    "load_s": statistics.median(loads), "commit_s": statistics.median(t - l for t, l in zip(times, loads))}
        return {"s": time.perf_counter() - start}
    if system == "delta":
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake
        url = str(root / "delta")
        if what == "memory":
            before = rss()
            DeltaTable(url).file_uris()
            return {"rss_bytes_per_file": (rss() - before) / n}
        start = time.perf_counter()
        table = DeltaTable(url)
        if what == "point":
            files = len(table.file_uris(partition_filters=[("p", "=", POINT)]))
            assert files == n // PARTITIONS, files
        elif what == "full":
            assert len(table.get_add_actions(flatten=True)) >= n
            assert len(table.file_uris()) >= n
        elif what == "append":
            times = []
            for i in range(appends + 1):
                start = time.perf_counter()
                write_deltalake(url, pa.table({"id": pa.array([i], pa.int64()), "p": [partition_value(i)],
                                               "v": [i / 2]}), mode="append", partition_by=["p"])
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            DeltaTable(url).create_checkpoint()
            return {"append_s": statistics.median(times[:appends]), "appends": times[:appends],
                    "checkpoint_s": time.perf_counter() - start}
        return {"s": time.perf_counter() - start}
    if system in ("iceberg", "iceberg-split"):
        import pyarrow as pa
        import pyiceberg.catalog.sql  # noqa: F401 - imported before timing, as delta-rs and cdkds are
        import pyiceberg.io.pyarrow  # noqa: F401
        import pyiceberg.table  # noqa: F401
        if what == "memory":
            return {}
        start = time.perf_counter()
        table = iceberg_catalog(root, system).load_table("bench.events")
        if what == "point":
            files = len(list(table.scan(row_filter=f"p = '{POINT}'").plan_files()))
            assert files == n // PARTITIONS, files
        elif what == "full":
            assert len(list(table.scan().plan_files())) >= n
        elif what == "append":
            times = []
            for i in range(appends):
                start = time.perf_counter()
                iceberg_catalog(root, system).load_table("bench.events").append(
                    pa.table({"id": pa.array([i], pa.int64()), "p": [partition_value(i)], "v": [i / 2]}))
                times.append(time.perf_counter() - start)
            return {"append_s": statistics.median(times), "appends": times}
        return {"s": time.perf_counter() - start}
    raise ValueError(system)


def in_child(system: str, what: str, root: Path, n: int, appends: int = 0) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([system, what, str(root), n, appends])],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{system} {what} at {n} files failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------ the table

def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def run_size(base: Path, n: int, systems: list[str], runs: int, appends: int, profile: bool) -> dict:
    result: dict = {"files": n, "runs": runs, "appends": appends, "build": {}, **{s: {} for s in SYSTEMS}}
    root = base / f"n{n}"
    root.mkdir(parents=True)
    templates = pyarrow_templates(root / "templates-pyarrow") if set(systems) - {"cdkds"} else {}
    builders = {"cdkds": lambda: build_cdkds(root / "cdkds", n), "delta": lambda: build_delta(root, n, templates),
                "iceberg": lambda: build_iceberg(root, n, templates),
                "iceberg-split": lambda: build_iceberg(root, n, templates, "iceberg-split", SPLIT_COMMITS)}
    for system in systems:
        start = time.perf_counter()
        result["build"][system] = builders[system]()
        print(f"  built {system} at {n:,} files in {time.perf_counter() - start:.1f} s: {result['build'][system]}",
              flush=True)
        where = root / "cdkds" if system == "cdkds" else root
        for what in ("open", "point", "full"):
            times = [in_child(system, what, where, n)["s"] for _ in range(runs)]
            result[system][what] = {"median_s": statistics.median(times), "runs_s": times}
            print(f"  {system} {what}: {fmt_s(statistics.median(times))} ({', '.join(fmt_s(t) for t in times)})",
                  flush=True)
        result[system]["memory"] = in_child(system, "memory", where, n)
        print(f"  {system} memory: {result[system]['memory']}", flush=True)
        if profile and system == "cdkds":
            result["cdkds"]["profile"] = in_child("cdkds", "profile", where, n)
            for step in ("load", "point", "full"):
                print(result["cdkds"]["profile"][f"{step}_tottime"], flush=True)
        result[system]["append"] = in_child(system, "append", where, n, appends)
        print(f"  {system} load + append: {fmt_s(result[system]['append']['append_s'])}"
              + (f" (load {fmt_s(result[system]['append']['load_s'])}, append {fmt_s(result[system]['append']['commit_s'])})"
                 if "load_s" in result[system]["append"] else "")
              + (f", checkpoint write {fmt_s(result[system]['append']['checkpoint_s'])}"
                 if "checkpoint_s" in result[system]["append"] else ""), flush=True)
    return result


def print_table(results: list[dict]) -> None:
    """One Markdown table: each measurement for cdkds and the others, with cdkds ÷ other."""
    others = [("delta", "delta-rs"), ("iceberg", "pyiceberg"), ("iceberg-split", f"pyiceberg, {SPLIT_COMMITS} manifests")]
    print("\n| files | measurement | cdkds | " + " | ".join(f"{label} (cdkds ÷)" for _, label in others) + " |")
    print("| --- | --- | --- |" + " --- |" * len(others))
    ratio = lambda a, b: f" ({a / b:.2f}×)" if a is not None and b else ""  # noqa: E731

    def line(n: int, label: str, values: dict[str, float | None]) -> None:
        c = values.get("cdkds")
        cells = [fmt_s(values.get(s)) + ratio(c, values.get(s)) for s, _ in others]
        print(f"| {n:,} | {label} | {fmt_s(c)} | " + " | ".join(cells) + " |")

    for r in results:
        n = r["files"]
        for label, key in (("open", "open"), ("open + plan p = x", "point"), ("open + full plan", "full")):
            line(n, label, {s: r.get(s, {}).get(key, {}).get("median_s") for s in SYSTEMS})
        line(n, f"load + append one row (median of {r['appends']})",
             {s: r.get(s, {}).get("append", {}).get("append_s") for s in SYSTEMS})
        line(n, "checkpoint write (after an append)",
             {s: r.get(s, {}).get("append", {}).get("checkpoint_s") for s in SYSTEMS})
        mem, delta = r.get("cdkds", {}).get("memory", {}), r.get("delta", {}).get("memory", {})
        if mem:
            print(f"| {n:,} | snapshot memory a file | {mem['heap_bytes_per_file']:.0f} B heap"
                  f" ({mem.get('arrow_bytes_per_file', 0):.0f} B of it Arrow), "
                  f"{mem['rss_bytes_per_file']:.0f} B RSS | "
                  + (f"{delta['rss_bytes_per_file']:.0f} B RSS" if delta else "n/a") + " | n/a | n/a |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per open/plan measurement")
    parser.add_argument("--appends", type=int, default=12)
    parser.add_argument("--only", default=",".join(SYSTEMS))
    parser.add_argument("--profile", type=int, default=100_000, help="profile cdkds's open + plan at this size")
    parser.add_argument("--root", default=None, help="where to build (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the built tables")
    parser.add_argument("--output", default=str(Path(__file__).with_name("results-scale.json")))
    parser.add_argument("--table", action="store_true", help="print the table of the results file and stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.table:
        print_table([r for _, r in sorted(json.loads(Path(args.output).read_text()).items(), key=lambda x: int(x[0]))])
        return
    if args.child:
        system, what, root, n, appends = json.loads(args.child)
        print(json.dumps(measure(system, what, Path(root), n, appends)))
        return
    systems = args.only.split(",")
    base = Path(tempfile.mkdtemp(prefix="cdkds-scale-", dir=args.root))
    results = []
    try:
        for n in (int(x) for x in args.files.split(",")):
            print(f"{n:,} files ({', '.join(systems)}):", flush=True)
            results.append(run_size(base, n, systems, args.runs, args.appends, n == args.profile))
            print_table(results[-1:])
            if not args.keep:
                shutil.rmtree(base / f"n{n}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    previous = json.loads(Path(args.output).read_text()) if Path(args.output).exists() else {}
    for r in results:  # a run of some systems keeps the figures of the others at that size
        entry = previous.setdefault(str(r["files"]), {"build": {}})
        entry["build"].update(r["build"])
        entry.update({k: v for k, v in r.items() if k != "build" and v != {}})
    Path(args.output).write_text(json.dumps(previous, indent=1) + "\n")


if __name__ == "__main__":
    main()
