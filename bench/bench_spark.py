"""Spark connector batch read vs Spark reading the same rows from a local Parquet file, same run.

Fills a 4-partition topic of a fresh ``quire standalone`` with N 100-byte messages (batched
producer), then times, in one local Spark session (``local[2]``):
  * ``spark.read.format("pulsar")...load().count()`` in broker read mode and in direct mode
    (ledgers read from the bookie, metadata from a snapshot of the standalone's RocksDB store),
  * the same DataFrame written to Parquet,
  * ``spark.read.parquet(<those rows>)`` counting ``value`` (the goal's reference: Parquet reads that
    column only) and counting every column, and a Parquet-to-Parquet copy,
  * Spark's floor: a Python data source yielding the same number of pre-built record batches of
    the connector's seven columns in as many tasks (what shipping these rows costs Spark itself),
  * a streaming query (Trigger.AvailableNow, noop sink) over the whole backlog (ingest rows/s),
  * those Parquet rows written to a 4-partition topic with the connector (write rows/s).
Each timing is the best of ``--repeat`` runs; the counts run in interleaved rounds (the ratio of
each round and their median are kept too: the machine may be shared). Prints the figures and the
ratios pulsar/parquet and writes bench/results/bench_spark.json.

    .venv/bin/python bench/bench_spark.py [--messages 200000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_clients import start_standalone  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402


def admin(url: str, method: str, path: str, body: object) -> None:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def fill(url: str, topic: str, n: int) -> float:
    import clients

    t0 = time.perf_counter()
    c = clients.Client(url)
    p = c.create_producer(topic, batching_enabled=True, batching_max_messages=1000, block_if_queue_full=True,
                          max_pending_messages=20000)
    payload = b"x" * 100
    failed: list[object] = []

    def sent(result: object, _mid: object) -> None:
        if result != clients.Result.Ok:
            failed.append(result)

    for i in range(n):
        p.send_async(payload, sent, partition_key=str(i % 97))
    p.flush()
    p.close()
    c.close()
    if failed:  # a fill short of n would be measured as if whole
        raise RuntimeError(f"fill: {len(failed)} of {n} sends failed ({failed[0]})")
    return time.perf_counter() - t0


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


_FLOOR_BATCHES: dict[int, object] = {}  # per Python worker: rows -> a pre-built record batch


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, tasks: int) -> None:
        self.rows, self.tasks = rows, tasks

    def partitions(self) -> list:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition):  # type: ignore[no-untyped-def]
        import numpy as np
        import pyarrow as pa

        from spark_connector.rows import ARROW_SCHEMA
        from spark_connector.task_trace import traced

        n = 65536  # the connector's recordBatchSize
        full: Any = _FLOOR_BATCHES.get(n)
        if full is None:
            ts = pa.timestamp("us", tz="UTC")
            full = _FLOOR_BATCHES[n] = pa.RecordBatch.from_arrays([
                pa.array([b"x" * 100] * n, pa.binary()),
                pa.array([str(i % 97) for i in range(n)], pa.string()),
                pa.repeat(pa.scalar("persistent://public/default/bench-spark-partition-0", pa.string()), n),
                pa.array([b"\x08\x05\x10\xe7\x07\x18\x01 \xe7\x070\xe8\x07"] * n, pa.binary()),
                pa.array(np.full(n, 1_700_000_000_000_000, np.int64), ts),
                pa.nulls(n, ts),
                pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()),
                                        pa.array([], pa.string())),
            ], schema=ARROW_SCHEMA)
        left = self.rows // self.tasks + (1 if partition.value < self.rows % self.tasks else 0)

        def batches():  # type: ignore[no-untyped-def]
            nonlocal left
            while left > 0:
                yield full if left >= n else full.slice(0, left)
                left -= n
        yield from traced(batches(), "floor")


class FloorSource(DataSource):
    """Spark's floor for this read: a Python data source whose tasks yield pre-built record
    batches of the connector's seven columns (no fetch, no decode), as many rows and tasks as
    the connector's read (options ``rows``, ``tasks``)."""

    @classmethod
    def name(cls) -> str:
        return "spark_floor"

    def schema(self) -> str:
        from spark_connector.rows import SCHEMA_DDL
        return SCHEMA_DDL

    def reader(self, schema: Any) -> FloorReader:
        return FloorReader(int(self.options["rows"]), int(self.options.get("tasks", "2")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000, help="messages to read (issue target: 1,000,000)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_spark.json"))
    args = ap.parse_args()

    load_at_start = round(os.getloadavg()[0], 1)
    root = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    proc, url = start_standalone(root)
    web = None
    for line in proc.args:  # the admin port is the value after --web-port
        if web == "next":
            web = line
            break
        if line == "--web-port":
            web = "next"
    admin_url = f"http://127.0.0.1:{web}"
    try:
        topic = "bench-spark"
        admin(admin_url, "PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", 4)
        fill_s = fill(url, topic, args.messages)

        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        from spark_connector import PulsarDataSource

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(PulsarDataSource)
        spark.dataSource.register(FloorSource)
        df = (spark.read.format("pulsar").option("service.url", url).option("admin.url", admin_url)
              .option("topic", topic).load())
        direct = (spark.read.format("pulsar").option("service.url", url).option("admin.url", admin_url)
                  .option("topic", topic).option("readMode", "direct")
                  .option("metadata.url", f"rocksdb://{root / 'data' / 'metadata'}").load())
        ref = str(root / "reference.parquet")
        floor = spark.read.format("spark_floor").option("rows", str(args.messages)) \
            .option("tasks", str(df.rdd.getNumPartitions())).load()
        df.count(), direct.count(), floor.count()  # warm-up: Spark's Python workers start, modules load
        pulsar_parquet_s, _ = best(lambda: df.write.mode("overwrite").parquet(ref), args.repeat)
        pq = spark.read.parquet(ref)
        # the same rows with every column read (the connector cannot prune columns: it always
        # ships all seven); the goal's reference reads only `value`
        every = [f"count({c})" for c in pq.columns]
        counts = {
            "pulsar": df.count,
            "direct": direct.count,
            "floor": floor.count,
            "parquet": lambda: spark.read.parquet(ref).selectExpr("count(value)").collect()[0][0],
            "parquet_all": lambda: spark.read.parquet(ref).selectExpr(*every).collect()[0][0],
        }
        # rounds interleave the four counts, so each ratio compares times taken under the same load
        rounds: dict[str, list[float]] = {name: [] for name in counts}
        for _ in range(args.repeat):
            for name, fn in counts.items():
                t, got = best(fn, 1)
                assert got == args.messages, (name, got)
                rounds[name].append(t)
        pulsar_count_s, direct_count_s = min(rounds["pulsar"]), min(rounds["direct"])
        load_after_counts = round(os.getloadavg()[0], 1)
        parquet_count_s, parquet_all_s = min(rounds["parquet"]), min(rounds["parquet_all"])
        round_ratios = {f"{name}_over_parquet": [round(a / b, 2) for a, b in zip(rounds[name], rounds["parquet"])]
                        for name in ("pulsar", "direct", "floor")}
        def stream_all() -> None:
            q = (spark.readStream.format("pulsar").option("service.url", url).option("admin.url", admin_url)
                 .option("topic", topic).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", str(root / f"ckpt-{time.time_ns()}"))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
        stream_s, _ = best(stream_all, 1)
        copy = str(root / "copy.parquet")
        parquet_copy_s, _ = best(lambda: pq.write.mode("overwrite").parquet(copy), args.repeat)
        admin(admin_url, "PUT", "/admin/v2/persistent/public/default/bench-spark-out/partitions", 4)
        write_s, _ = best(lambda: pq.select("value").write.format("pulsar").option("service.url", url)
                          .option("topic", "bench-spark-out").mode("append").save(), 1)
        spark.stop()
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)

    result = {
        "messages": args.messages, "payload_bytes": 100, "partitions": 4, "spark_master": "local[2]",
        "load_average_1m_at_start": load_at_start,
        "load_average_1m_after_counts": load_after_counts,
        "load_average_1m_at_end": round(os.getloadavg()[0], 1),  # the machine is shared: ratios, not seconds
        "fill_s": round(fill_s, 2),
        "pulsar_count_s": round(pulsar_count_s, 3),
        "pulsar_rows_per_s": round(args.messages / pulsar_count_s),
        "stream_available_now_s": round(stream_s, 3),
        "stream_rows_per_s": round(args.messages / stream_s),
        "direct_count_s": round(direct_count_s, 3),
        "direct_rows_per_s": round(args.messages / direct_count_s),
        "pulsar_to_parquet_s": round(pulsar_parquet_s, 3),
        "parquet_count_s": round(parquet_count_s, 3),
        # Spark's own cost of shipping these rows from a Python data source (pre-built batches)
        "floor_count_s": round(min(rounds["floor"]), 3),
        "ratio_count_floor_over_parquet": round(min(rounds["floor"]) / parquet_count_s, 2),
        "parquet_all_columns_count_s": round(parquet_all_s, 3),
        "parquet_to_parquet_s": round(parquet_copy_s, 3),
        "pulsar_write_s": round(write_s, 3),
        "pulsar_write_rows_per_s": round(args.messages / write_s),
        "ratio_count_pulsar_over_parquet": round(pulsar_count_s / parquet_count_s, 2),
        "ratio_count_direct_over_parquet": round(direct_count_s / parquet_count_s, 2),
        "ratio_write_pulsar_over_parquet": round(pulsar_parquet_s / parquet_copy_s, 2),
        "ratio_count_per_round": round_ratios,
        "ratio_count_median_of_rounds": {k: round(statistics.median(v), 2) for k, v in round_ratios.items()},
        "ratio_count_pulsar_over_parquet_all_columns": round(pulsar_count_s / parquet_all_s, 2),
        "ratio_count_direct_over_parquet_all_columns": round(direct_count_s / parquet_all_s, 2),
    }
    print(json.dumps(result, indent=2))
    print(f"count: broker {result['ratio_count_pulsar_over_parquet']}x, direct {result['ratio_count_direct_over_parquet']}x "
          f"Parquet's time (goal 3x; Spark's floor {result['ratio_count_floor_over_parquet']}x); to Parquet: {result['ratio_write_pulsar_over_parquet']}x a Parquet copy")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
