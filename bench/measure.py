"""Timing and reporting for bench/shapes.py: the ways of reading a shape (the native paths,
the Python source) measured side by side with their anchor (Spark's Parquet source or
pyarrow reading the same files), interleaved so that a drift of a shared machine's speed
falls on all of them alike.

Each comparison: one warm-up run of every way, then ``repeat`` rounds; in each round every
way runs once (the order rotating from round to round). The ratio of a way is the median,
over the rounds, of its time divided by the anchor's time in the same round (a paired
ratio); the best-of ratio (best time over best time) is kept too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Goal:
    """A goal of the issue: a ratio against the anchor a way must not exceed."""
    name: str
    limit: float


FULL_SCAN = Goal("full scans, native path", 1.05)
ONE_OF_20 = Goal("one of 20 columns, native path, no option", 1.1)
SELECTIVE = Goal("selective query on a sorted column, native path", 1.0)
HASH_POINT = Goal("hash-bucket point query, native path (far below 1.0; read as <= 0.5)", 0.5)
PREDICATE_DELETE = Goal("after a 1% predicate delete, native path", 1.3)
PLAIN_PYTHON = Goal("plain Python to_table()", 1.1)
GOALS = (FULL_SCAN, ONE_OF_20, SELECTIVE, HASH_POINT, PREDICATE_DELETE, PLAIN_PYTHON)


@dataclass(frozen=True)
class Way:
    """One way of running a shape's query: ``run`` does it once and returns its result."""
    label: str
    run: Callable[[], Any]
    goal: Goal | None = None
    partitions: int | None = None
    plan: str | None = None  # what the Spark plan reads with: "Parquet FileScan", "Python source", both


class Timing:
    def __init__(self) -> None:
        self.runs: list[float] = []
        self.result: Any = None
        self.requests: dict | None = None

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def as_json(self) -> dict:
        return {"best_s": self.best, "median_s": self.median, "runs_s": self.runs, "requests": self.requests}


RESULTS: list[dict[str, Any]] = []


def compare(shape: str, what: str, ways: list[Way], anchor: Way, repeat: int,
            same: Callable[[Any, Any], bool], counter: Any = None, **extra: Any) -> None:
    """Time ``ways`` against ``anchor`` interleaved; ``same(way's result, anchor's result)``
    must hold for every way (a benchmark of wrong rows is worthless); records one row per way."""
    everyone = [anchor, *ways]
    for way in everyone:
        way.run()
    timings = [Timing() for _ in everyone]
    for round_ in range(repeat):
        for i in [(round_ + j) % len(everyone) for j in range(len(everyone))]:
            if counter:
                counter.reset()
            start = time.perf_counter()
            timings[i].result = everyone[i].run()
            timings[i].runs.append(time.perf_counter() - start)
            if counter:
                timings[i].requests = counter.read()
    a = timings[0]
    for way, t in zip(ways, timings[1:]):
        if not same(t.result, a.result):
            raise AssertionError(f"{shape} {what}: {way.label} gave {_brief(t.result)}, "
                                 f"{anchor.label} {_brief(a.result)}")
        ratio = statistics.median(x / y for x, y in zip(t.runs, a.runs))
        met = None if way.goal is None else ratio <= way.goal.limit
        RESULTS.append({"shape": shape, "what": what, "way": way.label, "timing": t.as_json(),
                        "anchor_name": anchor.label, "anchor": a.as_json(), "ratio": ratio,
                        "ratio_best": t.best / a.best, "goal": way.goal and way.goal.name,
                        "goal_limit": way.goal and way.goal.limit, "met": met, "plan": way.plan,
                        "partitions": way.partitions, "partitions_anchor": anchor.partitions, **extra})
        print(f"  {what[:40]:40} {way.label[:28]:28} {t.median:7.3f} s | {anchor.label[:24]:24} {a.median:7.3f} s"
              f" | {ratio:5.2f}x (best {t.best / a.best:4.2f}x) {_goal_text(way.goal, met)}"
              f"{f' | {way.plan}' if way.plan else ''}", flush=True)
        if t.requests is not None:
            print(f"      S3 requests, {way.label}: {requests_text(t.requests)}", flush=True)
    if a.requests is not None:
        print(f"      S3 requests, {anchor.label}: {requests_text(a.requests)}", flush=True)


def _brief(result: Any) -> str:
    text = repr(result)
    return text if len(text) < 200 else text[:200] + "..."


def _goal_text(goal: Goal | None, met: bool | None) -> str:
    return "(reference)" if goal is None else f"(goal <= {goal.limit}: {'met' if met else 'NOT met'})"


def requests_text(counts: dict) -> str:
    kinds = {k: v for k, v in counts.items() if not k.startswith("bytes")}
    return f"{sum(kinds.values())} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}; " \
           f"{counts.get('bytes_out', 0) / 1e6:.1f} MB down, {counts.get('bytes_in', 0) / 1e6:.1f} MB up)"


def print_table() -> None:
    print(f"\n{'shape':22} {'query':40} {'way':28} {'median s':>8} {'anchor s':>8} {'ratio':>6} {'best':>6}"
          f"  goal    met  partitions  plan")
    for r in RESULTS:
        limit = "-" if r["goal_limit"] is None else f"<={r['goal_limit']}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        parts = f"{r['partitions'] if r['partitions'] is not None else '-'}/" \
                f"{r['partitions_anchor'] if r['partitions_anchor'] is not None else '-'}"
        print(f"{r['shape'][:22]:22} {r['what'][:40]:40} {r['way'][:28]:28} {r['timing']['median_s']:8.3f} "
              f"{r['anchor']['median_s']:8.3f} {r['ratio']:5.2f}x {r['ratio_best']:5.2f}x  {limit:7} {met:4} "
              f"{parts:11} {r['plan'] or ''}")
    print("\ngoals (ratio: median of paired ratios):")
    for goal in GOALS:
        rows = [r for r in RESULTS if r["goal"] == goal.name]
        if not rows:
            print(f"  {goal.name} <= {goal.limit}: not measured in this run")
            continue
        worst = max(rows, key=lambda r: r["ratio"])
        verdict = "MET" if all(r["met"] for r in rows) else "NOT met"
        print(f"  {goal.name} <= {goal.limit}: {verdict} (worst {worst['ratio']:.2f}x: {worst['shape']}, "
              f"{worst['what']})")
        for r in rows:
            if not r["met"]:
                print(f"      missed: {r['shape']}, {r['what']}, {r['way']}: {r['ratio']:.2f}x")


def goals_json() -> list[dict]:
    out = []
    for goal in GOALS:
        rows = [r for r in RESULTS if r["goal"] == goal.name]
        out.append({"goal": goal.name, "limit": goal.limit, "measured": bool(rows),
                    "met": bool(rows) and all(r["met"] for r in rows),
                    "ratios": {f"{r['shape']}: {r['what']}: {r['way']}": round(r["ratio"], 3) for r in rows}})
    return out
