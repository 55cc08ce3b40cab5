"""A fault-injecting wrapper around s3fs: fails chosen S3 calls before or after they run.

A failure *after* the call is a lost acknowledgement: the object store did the work but
the client saw an error, which is what makes retried commits dangerous.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Fault:
    method: str  # the S3 API method, e.g. "put_object"
    when: str = "before"  # "before": the call never happens; "after": it happens, the answer is lost
    error: Callable[[], BaseException] = lambda: OSError("503 Slow Down (injected)")
    match: Callable[[dict], bool] = lambda kwargs: True
    times: int = 1  # how many matching calls fail
    probability: float = 1.0


@dataclass
class FaultInjector:
    faults: list[Fault] = field(default_factory=list)
    injected: int = 0
    calls: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(1))

    def install(self, fs: Any) -> Any:
        original = fs._call_s3

        async def call(method: str, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            fault = self._pick(method, kwargs)
            if fault is not None and fault.when == "before":
                self.injected += 1
                raise fault.error()
            result = await original(method, *args, **kwargs)
            if fault is not None:
                self.injected += 1
                raise fault.error()
            return result

        from fsspec.asyn import sync

        fs._call_s3 = call
        fs.call_s3 = lambda method, *args, **kwargs: sync(fs.loop, call, method, *args, **kwargs)  # file objects
        return fs

    def _pick(self, method: str, kwargs: dict) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.times > 0 and fault.match(kwargs) and \
                    self.rng.random() < fault.probability:
                fault.times -= 1
                return fault
        return None


def is_commit(kwargs: dict) -> bool:
    return kwargs.get("IfNoneMatch") == "*" and kwargs.get("Key", "").endswith(".json")


def is_data_file(kwargs: dict) -> bool:
    return "/data/" in kwargs.get("Key", "")


def is_checkpoint(kwargs: dict) -> bool:
    return kwargs.get("Key", "").endswith(".checkpoint.parquet")
