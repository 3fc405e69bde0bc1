"""Where a read task's time goes, logged from inside the Python worker (``QUIRE_SPARK_TRACE``).

With ``QUIRE_SPARK_TRACE=/some/file`` in the executors' environment, each batch read task appends
one JSON line: its worker's pid, the rows, the wall time until the first record batch, the wall
and CPU time spent producing batches (fetch waits and decoding, in the task's thread), the wall
and CPU time spent outside the generator (Spark serializing the batches to the JVM, or waiting
for it), and the CPU time of the whole worker process (the fetcher's thread too). Off by default:
nothing is measured then.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterator

import pyarrow as pa

TRACE_ENV = "QUIRE_SPARK_TRACE"


def traced(batches: Iterator[pa.RecordBatch], label: str) -> Iterator[pa.RecordBatch]:
    """``batches`` unchanged; with ``QUIRE_SPARK_TRACE`` set, their task's timings appended there."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        yield from batches
        return
    w0, p0 = time.perf_counter(), time.process_time()
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
        w, c = time.perf_counter(), time.thread_time()
        yield batch
        outside_wall += time.perf_counter() - w
        outside_cpu += time.thread_time() - c
    line = {"pid": os.getpid(), "task": label, "rows": rows, "wall_s": time.perf_counter() - w0,
            "first_batch_s": first, "produce_wall_s": inside_wall, "produce_cpu_s": inside_cpu,
            "spark_wall_s": outside_wall, "spark_cpu_s": outside_cpu,
            "process_cpu_s": time.process_time() - p0}
    with open(path, "a") as f:
        f.write(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in line.items()}) + "\n")


def trace_planning(plan: Callable[[], list[Any]]) -> list[Any]:
    """``plan()``; with ``QUIRE_SPARK_TRACE`` set, its wall and CPU time appended there (the driver
    plans in a Python worker of its own: this shows whether it is a fresh process)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return plan()
    w0, c0 = time.perf_counter(), time.process_time()
    parts = plan()
    line = {"pid": os.getpid(), "plan": len(parts), "wall_s": round(time.perf_counter() - w0, 4),
            "cpu_s": round(time.process_time() - c0, 4), "process_cpu_s": round(time.process_time(), 3)}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    return parts
