"""Spark's floor per column: what a ``count()`` pays to ship each of the connector's columns.

A Python data source yields pre-built record batches (no fetch, no decode) holding the values
the connector produces for bench_spark's workload (``value`` 100 B, ``__key`` ``str(i % 97)``,
``__topic`` the partition's full name, ``__messageId`` a 13-byte serialized id, a publish time,
a null event time, no properties) in as many tasks as the connector plans (2); each variant
declares only the columns it ships, so Spark converts only those. Variants: no column but a
row count (one int), each column alone, all but one, all seven; all seven with other rows per
record batch; and the layouts a message without a key or properties could have (``__key``
empty string vs null, ``__messageProperties`` null vs an empty map). Each variant's ``count()``
is timed in interleaved rounds (best and median) in one ``local[2]`` session; CPU seconds of the
JVM and of the Python workers per count come from /proc/PID/stat.

    .venv/bin/python bench/probe_spark_floor.py [--rows 1000000] [--rounds 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

from bench.bench_spark_ab import cpu_s, descendants, is_jvm  # noqa: E402

COLUMNS = ["value", "__key", "__topic", "__messageId", "__publishTime", "__eventTime", "__messageProperties"]
TOPIC = "persistent://public/default/bench-spark-partition-0"
MESSAGE_ID = b"\x08\x05\x10\xe7\x07\x18\x01 \xe7\x070\xe8\x07"  # ledger 5, entry 999, index 999 of 1000
_BUILT: dict[tuple, Any] = {}  # per Python worker: (columns, rows, layout) -> record batch


def column(name: str, n: int, layout: str) -> Any:
    """The connector's column ``name`` for ``n`` rows of the bench (``layout``: a variant of it)."""
    import numpy as np
    import pyarrow as pa

    from spark_connector.rows import ARROW_SCHEMA

    ts = ARROW_SCHEMA.field("__publishTime").type
    if name == "int":
        return pa.array(np.arange(n, dtype=np.int64))
    if name == "value":
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 100),
                                                      pa.py_buffer(b"x" * (100 * n))])
    if name == "__key":
        if layout == "key_null":
            return pa.nulls(n, pa.string())
        if layout == "key_empty":
            return pa.array(np.full(n, "", object), pa.string())
        return pa.array([str(i % 97) for i in range(n)], pa.string())
    if name == "__topic":
        return pa.repeat(pa.scalar(TOPIC, pa.string()), n)
    if name == "__messageId":
        size = len(MESSAGE_ID)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * size),
                                                      pa.py_buffer(MESSAGE_ID * n)])
    if name == "__publishTime":
        return pa.array(np.full(n, 1_700_000_000_000_000, np.int64), ts)
    if name == "__eventTime":
        return pa.nulls(n, ts)
    if name == "__messageProperties":
        offsets = pa.array(np.zeros(n + 1, np.int32))
        empty = pa.array([], pa.string())
        if layout == "props_null":  # every row's map is null (no properties)
            return pa.MapArray.from_arrays(offsets, empty, empty, mask=pa.array(np.ones(n, bool)))
        return pa.MapArray.from_arrays(offsets, empty, empty)
    raise ValueError(name)


def schema_of(names: list[str]) -> Any:
    import pyarrow as pa

    from spark_connector.rows import ARROW_SCHEMA

    return pa.schema([pa.field("int", pa.int64()) if c == "int" else ARROW_SCHEMA.field(c) for c in names])


def ddl_of(names: list[str]) -> str:
    from spark_connector.rows import SCHEMA_DDL

    types = dict(f.strip().split(" ", 1) for f in SCHEMA_DDL.replace("MAP<STRING, STRING>", "MAP<STRING,STRING>")
                 .split(", "))
    return ", ".join("int BIGINT" if c == "int" else f"{c} {types[c]}" for c in names)


class ProbeReader(DataSourceReader):
    def __init__(self, names: list[str], rows: int, tasks: int, batch_rows: int, layout: str) -> None:
        self.names, self.rows, self.tasks, self.batch_rows, self.layout = names, rows, tasks, batch_rows, layout

    def partitions(self) -> list:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition):  # type: ignore[no-untyped-def]
        import pyarrow as pa

        n = self.batch_rows
        key = (tuple(self.names), n, self.layout)
        full = _BUILT.get(key)
        if full is None:
            full = _BUILT[key] = pa.RecordBatch.from_arrays([column(c, n, self.layout) for c in self.names],
                                                            schema=schema_of(self.names))
        left = self.rows // self.tasks + (1 if partition.value < self.rows % self.tasks else 0)
        while left > 0:
            yield full if left >= n else full.slice(0, left)
            left -= n


class ProbeSource(DataSource):
    """Options: ``columns`` (comma separated), ``rows``, ``tasks``, ``batchRows``, ``layout``."""

    @classmethod
    def name(cls) -> str:
        return "spark_floor_probe"

    def schema(self) -> str:
        return ddl_of(self.options["columns"].split(","))

    def reader(self, schema: Any) -> ProbeReader:
        o = self.options
        return ProbeReader(o["columns"].split(","), int(o["rows"]), int(o.get("tasks", "2")),
                           int(o.get("batchRows", "65536")), o.get("layout", ""))


def variants() -> dict[str, tuple[list[str], int, str]]:
    """name -> (columns, rows per batch, layout)."""
    out: dict[str, tuple[list[str], int, str]] = {"rows only (one int)": (["int"], 65536, "")}
    for c in COLUMNS:
        out[f"only {c}"] = ([c], 65536, "")
    for c in COLUMNS:
        out[f"all but {c}"] = ([x for x in COLUMNS if x != c], 65536, "")
    out["all seven"] = (COLUMNS, 65536, "")
    for b in (8192, 16384, 32768, 131072, 262144, 500000):
        out[f"all seven, {b} rows/batch"] = (COLUMNS, b, "")
    out["all seven, __key null"] = (COLUMNS, 65536, "key_null")
    out["all seven, __key empty string"] = (COLUMNS, 65536, "key_empty")
    out["all seven, __messageProperties null"] = (COLUMNS, 65536, "props_null")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated substrings: run the variants naming one")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ProbeSource)
    chosen = {k: v for k, v in variants().items()
              if not args.only or any(s in k for s in args.only.split(","))}
    frames = {k: spark.read.format("spark_floor_probe").option("columns", ",".join(cols))
              .option("rows", str(args.rows)).option("tasks", str(args.tasks)).option("batchRows", str(b))
              .option("layout", layout).load() for k, (cols, b, layout) in chosen.items()}
    jvm = [p for p in descendants(os.getpid()) if is_jvm(p)]
    for df in frames.values():  # warm-up: workers start, batches are built
        assert df.count() == args.rows
    load = [round(os.getloadavg()[0], 2)]
    times: dict[str, list[float]] = {k: [] for k in frames}
    jvm_cpu: dict[str, list[float]] = {k: [] for k in frames}
    py_cpu: dict[str, list[float]] = {k: [] for k in frames}
    for _ in range(args.rounds):
        for k, df in frames.items():
            tree = descendants(jvm[0]) if jvm else []
            before_j, before_p = sum(cpu_s(p) for p in jvm), {p: cpu_s(p) for p in tree}
            t0 = time.perf_counter()
            got = df.count()
            times[k].append(time.perf_counter() - t0)
            assert got == args.rows, (k, got)
            jvm_cpu[k].append(sum(cpu_s(p) for p in jvm) - before_j)
            tree = descendants(jvm[0]) if jvm else []
            py_cpu[k].append(sum(cpu_s(p) - before_p.get(p, 0.0) for p in tree))
        load.append(round(os.getloadavg()[0], 2))
    spark.stop()
    rows = {k: {"best_s": round(min(v), 3), "median_s": round(statistics.median(v), 3),
                "jvm_cpu_s": round(statistics.median(jvm_cpu[k]), 3),
                "python_cpu_s": round(statistics.median(py_cpu[k]), 3)} for k, v in times.items()}
    print(f"{'variant':42s} {'best':>7s} {'median':>7s} {'jvm cpu':>8s} {'py cpu':>7s}")
    for k, r in rows.items():
        print(f"{k:42s} {r['best_s']:7.3f} {r['median_s']:7.3f} {r['jvm_cpu_s']:8.3f} {r['python_cpu_s']:7.3f}")
    print("load averages (1 min) per round:", load)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": args.rows, "rounds": args.rounds, "tasks": args.tasks,
                                              "load_1m": load, "variants": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
