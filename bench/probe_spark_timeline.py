"""Where a Spark batch ``count()`` of the bench topic spends its wall time, as a timeline.

Fills a fresh standalone as ``bench_spark_ab`` does (N 100-byte messages, 4 partitions), starts a
``local[2]`` session with ``QUIRE_SPARK_TRACE`` set, and times ``count()`` of Spark's floor
(bench_spark's FloorSource), direct mode and broker mode in interleaved rounds. Each count's
planning line and task lines (absolute times from inside the Python workers, see
``spark_connector.task_trace``) are laid out relative to the driver's ``count()`` call:
planning start/end, each task's start, first batch, last batch and end (with its read's marks),
and when ``count()`` returned. Prints one table per mode (medians over rounds) and writes the
raw lines as JSON; ``--table FILE...`` prints the phase medians of earlier runs.

    .venv/bin/python bench/probe_spark_timeline.py [--messages 1000000] [--rounds 5] [--out FILE]
    .venv/bin/python bench/probe_spark_timeline.py --table bench/results/spark13h_timeline_final_*.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def timeline(lines: list[dict[str, Any]], t_call: float, t_ret: float) -> dict[str, Any]:
    """One count's phases in ms after its ``count()`` call."""
    ms = lambda t: None if t is None else round((t - t_call) * 1000, 1)  # noqa: E731
    plans = [x for x in lines if "plan" in x]
    tasks = sorted((x for x in lines if "task" in x), key=lambda x: x["start_at"])
    out: dict[str, Any] = {"returned": ms(t_ret)}
    if plans:
        out["plan_start"], out["plan_end"] = ms(plans[0]["start_at"]), ms(plans[-1]["end_at"])
        out["plans"] = len(plans)
    out["tasks"] = [{"rows": t["rows"], "start": ms(t["start_at"]),
                     "first": ms(t["start_at"] + t["first_batch_s"]) if t["first_batch_s"] is not None else None,
                     "last": ms(t["last_batch_at"]), "end": ms(t["end_at"]),
                     "marks": [[n, ms(at)] for n, at in t.get("marks", [])]} for t in tasks]
    return out


def summary(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Medians over rounds of: planning, first task start, first batch (earliest), last batch and
    end of the task ending last, the other task's end, and ``count()``'s return."""
    def med(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return round(statistics.median(got), 1) if got else None
    keys: dict[str, list[float | None]] = {}
    for r in runs:
        ts = r["tasks"]
        ends = sorted(t["end"] for t in ts)
        row = {"plan_start": r.get("plan_start"), "plan_end": r.get("plan_end"),
               "first_task_start": min(t["start"] for t in ts),
               "last_task_start": max(t["start"] for t in ts),
               "first_batch": min((t["first"] for t in ts if t["first"] is not None), default=None),
               "first_task_end": ends[0], "last_task_end": ends[-1],
               "last_task_last_batch": max(t["last"] for t in ts if t["last"] is not None),
               "returned": r["returned"]}
        closes = [b - a for t in ts for (n, a), (m, b) in zip(t["marks"], t["marks"][1:])
                  if n == "close_start" and m == "close_end"]
        row["close_ms_total"] = sum(closes) if closes else None
        for k, v in row.items():
            keys.setdefault(k, []).append(v)
    return {k: med(v) for k, v in keys.items()}


def phases(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over counts of the phases in ``bench/results/spark13h.md``'s table (ms)."""
    keys: dict[str, list[float]] = {}
    for r in runs:
        ts = r["tasks"]
        ends = sorted(t["end"] for t in ts)
        last = next(t for t in ts if t["end"] == ends[-1])
        row = {"count -> first task start": min(t["start"] for t in ts),
               "first batch after its task start": statistics.median(t["first"] - t["start"] for t in ts),
               "task start -> end": statistics.median(t["end"] - t["start"] for t in ts),
               "first task end": ends[0], "last task end": ends[-1], "end spread": ends[-1] - ends[0],
               "last batch -> its task end": last["end"] - last["last"],
               "last task end -> count returns": r["returned"] - ends[-1], "count returns": r["returned"],
               "rows per task max / min": max(t["rows"] for t in ts) / min(t["rows"] for t in ts)}
        for k, v in row.items():
            keys.setdefault(k, []).append(v)
    return {k: round(statistics.median(v), 3) for k, v in keys.items()}


def table(files: list[str]) -> None:
    """Print the phase medians of the counts in ``files`` (this probe's --out), per mode."""
    runs: dict[str, list[dict[str, Any]]] = {}
    loads: list[float] = []
    for f in files:
        got = json.loads(Path(f).read_text())
        loads += got["load_1m"]
        for mode, rs in got["runs"].items():
            runs.setdefault(mode, []).extend(rs)
    print(f"{len(files)} runs, load {min(loads)}-{max(loads)}, counts per mode",
          {m: len(rs) for m, rs in runs.items()})
    cols = {m: phases(rs) for m, rs in runs.items()}
    print("| ms (median) | " + " | ".join(cols) + " |")
    for k in next(iter(cols.values())):
        print(f"| {k} | " + " | ".join(f"{c[k]:g}" for c in cols.values()) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", nargs="+", metavar="FILE", help="only print the phase table of earlier --out files")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default="floor,direct,broker")
    ap.add_argument("--broker-queue", type=int, default=0,
                    help="also mode broker_q: broker mode with this pulsar.reader.receiverQueueSize")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return

    from bench.bench_spark_ab import filled_standalone

    trace = Path(tempfile.mkstemp(prefix="spark-trace-", suffix=".jsonl")[1])
    os.environ["QUIRE_SPARK_TRACE"] = str(trace)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    loads = [round(os.getloadavg()[0], 1)]
    with filled_standalone(args.messages, "spark-timeline-") as (_proc, url, admin_url, root):
        from pyspark.sql import SparkSession

        from bench.bench_spark import FloorSource
        from spark_connector import PulsarDataSource

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
                 .config("spark.executorEnv.QUIRE_SPARK_TRACE", str(trace)).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(PulsarDataSource)
        spark.dataSource.register(FloorSource)
        base = spark.read.format("pulsar").option("service.url", url).option("admin.url", admin_url) \
            .option("topic", "bench-spark")
        frames = {"broker": base.load(),
                  "direct": base.option("readMode", "direct")
                  .option("metadata.url", f"rocksdb://{root / 'data' / 'metadata'}").load()}
        if args.broker_queue:
            frames["broker_q"] = (spark.read.format("pulsar").option("service.url", url)  # a reader's options stick
                                  .option("admin.url", admin_url).option("topic", "bench-spark")
                                  .option("pulsar.reader.receiverQueueSize", str(args.broker_queue)).load())
        tasks = frames["broker"].rdd.getNumPartitions()
        frames["floor"] = spark.read.format("spark_floor").option("rows", str(args.messages)) \
            .option("tasks", str(tasks)).load()
        modes = args.modes.split(",")
        for m in modes:
            frames[m].count()  # warm-up
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for m in modes:
                trace.write_text("")
                t_call = time.time()
                got = frames[m].count()
                t_ret = time.time()
                assert got == args.messages, (m, got)
                time.sleep(0.05)  # the tasks' lines are written before count() returns; be sure
                lines = [json.loads(x) for x in trace.read_text().splitlines() if x.strip()]
                runs[m].append(timeline(lines, t_call, t_ret))
        loads.append(round(os.getloadavg()[0], 1))
        spark.stop()
    trace.unlink()
    result = {"messages": args.messages, "rounds": args.rounds, "load_1m": loads,
              "summary_ms": {m: summary(r) for m, r in runs.items()}, "runs": runs}
    for m in modes:
        print(m, json.dumps(result["summary_ms"][m]))
    print("load", loads)
    if args.out:
        Path(args.out).write_text(json.dumps(result, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
