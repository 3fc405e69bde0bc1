"""Where a read task's time goes, logged from inside the Python worker (``QUIRE_SPARK_TRACE``).

With ``QUIRE_SPARK_TRACE=/some/file`` in the executors' environment, each batch read task appends
one JSON line: its worker's pid, the rows, the wall time until the first record batch, the wall
and CPU time spent producing batches (fetch waits and decoding, in the task's thread), the wall
and CPU time spent outside the generator (Spark serializing the batches to the JVM, or waiting
for it), and the CPU time of the whole worker process (the fetcher's thread too). Off by default:
nothing is measured then. Each line also holds absolute times (``time.time()``, comparable with
the driver's clock: same machine) of the task's start, first and last batch and end, and the
``mark``s its read made (a range's fetcher started, fetched its last entry, was closed), so a
query's timeline can be laid out from its tasks' lines and the planning line.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterator

import pyarrow as pa

TRACE_ENV = "QUIRE_SPARK_TRACE"

_marks: list[tuple[str, float]] | None = None  # the traced task's marks (a worker runs one task at a time)


def mark(name: str) -> None:
    """Note when ``name`` happened in the traced task running in this worker (nothing when untraced)."""
    if _marks is not None:
        _marks.append((name, time.time()))


def traced(batches: Iterator[pa.RecordBatch], label: str) -> Iterator[pa.RecordBatch]:
    """``batches`` unchanged; with ``QUIRE_SPARK_TRACE`` set, their task's timings appended there."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        yield from batches
        return
    global _marks
    marks: list[tuple[str, float]] = []
    _marks = marks
    t0 = time.time()
    w0, p0 = time.perf_counter(), time.process_time()
    last_at = None
    inside_wall = inside_cpu = outside_wall = outside_cpu = 0.0
    first = None
    rows = 0
    while True:
        w, c = time.perf_counter(), time.thread_time()
        batch = next(batches, None)
        inside_wall += time.perf_counter() - w
        inside_cpu += time.thread_time() - c
        if batch is None:
            break
        if first is None:
            first = time.perf_counter() - w0
        rows += batch.num_rows
        last_at = time.time()
        w, c = time.perf_counter(), time.thread_time()
        yield batch
        outside_wall += time.perf_counter() - w
        outside_cpu += time.thread_time() - c
    _marks = None
    end_at = time.time()
    line = {"pid": os.getpid(), "task": label, "rows": rows, "wall_s": time.perf_counter() - w0,
            "first_batch_s": first, "produce_wall_s": inside_wall, "produce_cpu_s": inside_cpu,
            "spark_wall_s": outside_wall, "spark_cpu_s": outside_cpu,
            "process_cpu_s": time.process_time() - p0, "start_at": t0, "last_batch_at": last_at,
            "end_at": end_at, "marks": [[n, t] for n, t in marks]}
    with open(path, "a") as f:
        f.write(json.dumps({k: round(v, 4) if isinstance(v, float) and not k.endswith("_at") else v
                            for k, v in line.items()}) + "\n")


def trace_planning(plan: Callable[[], list[Any]]) -> list[Any]:
    """``plan()``; with ``QUIRE_SPARK_TRACE`` set, its wall and CPU time appended there (the driver
    plans in a Python worker of its own: this shows whether it is a fresh process)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return plan()
    t0 = time.time()
    w0, c0 = time.perf_counter(), time.process_time()
    parts = plan()
    line = {"pid": os.getpid(), "plan": len(parts), "start_at": t0, "end_at": time.time(),
            "wall_s": round(time.perf_counter() - w0, 4),
            "cpu_s": round(time.process_time() - c0, 4), "process_cpu_s": round(time.process_time(), 3)}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    return parts
