"""Paired A/B of the Spark connector's batch count: a base checkout vs this one, same standalone.

One ``quire standalone`` (this checkout's server) is filled once with N 100-byte messages on 4
partitions; then rounds alternate a child process per checkout (its own ``local[2]`` Spark
session with that checkout's ``spark_connector`` on PYTHONPATH). Each child warms up, then times
``count()`` of broker mode, direct mode, Spark's floor (bench_spark's FloorSource) and the Parquet
reference (``count(value)`` of the same rows), interleaved, and measures CPU seconds per count
of its own process tree (the JVM, Spark's Python workers) and of the standalone, from
/proc/PID/stat. The machine is shared: compare checkouts by the ratios within a round.

    .venv/bin/python bench/bench_spark_ab.py --base /work/wt/base [--messages 1000000] [--rounds 3]
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def tree_cpu(pids: list[int]) -> dict[int, float]:
    return {p: cpu_s(p) for p in pids}


def is_jvm(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False


@contextmanager
def filled_standalone(messages: int, prefix: str) -> Iterator[tuple[subprocess.Popen, str, str, Path]]:
    """A fresh standalone of this checkout with ``messages`` 100-byte messages on the 4-partition
    topic ``bench-spark``: ``(process, service url, admin url, data root)``."""
    sys.path.insert(0, str(REPO))
    from bench.bench_clients import start_standalone
    from bench.bench_spark import admin, fill

    root = Path(tempfile.mkdtemp(prefix=prefix))
    proc, url = start_standalone(root)
    admin_url = f"http://127.0.0.1:{proc.args[proc.args.index('--web-port') + 1]}"
    try:
        admin(admin_url, "PUT", "/admin/v2/persistent/public/default/bench-spark/partitions", 4)
        fill(url, "bench-spark", messages)
        yield proc, url, admin_url, root
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)


def paired_parser(doc: str, *, rounds: int, repeat: int, repeat_help: str,
                  child_options: tuple[str, ...]) -> argparse.ArgumentParser:
    """The options of a paired bench (and the hidden ones its children get)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--base", default="/work/wt/base", help="the other checkout (A)")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=rounds, help="child runs per checkout, alternating")
    ap.add_argument("--repeat", type=int, default=repeat, help=repeat_help)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for a in child_options:
        ap.add_argument(f"--{a}", help=argparse.SUPPRESS)
    ap.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    return ap


def paired_runs(base: str, rounds: int) -> Iterator[tuple[int, str, Path]]:
    """``(round, name, checkout)``: base and this checkout alternate, and which goes first too."""
    checkouts = [("base", Path(base).resolve()), ("this", REPO)]
    for r in range(rounds):
        for name, co in (checkouts if r % 2 == 0 else checkouts[::-1]):
            yield r, name, co


def run_child(script: str, checkout: Path, args: list[str]) -> dict[str, Any]:
    """``script --child args`` with ``checkout`` first on PYTHONPATH: the JSON of its RESULT line."""
    run = subprocess.run([sys.executable, script, "--child", *args], env={**os.environ, "PYTHONPATH": str(checkout)},
                         cwd=checkout, capture_output=True, text=True, timeout=900)
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    if run.returncode or not line:
        raise SystemExit(f"{checkout} child failed:\n{run.stderr[-3000:]}")
    return json.loads(line[0][len("RESULT "):])


def child(args: argparse.Namespace) -> None:
    """One checkout's counts (run with that checkout first on PYTHONPATH)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    sys.path.append(str(REPO))  # after the checkout under test (PYTHONPATH)
    from bench.bench_spark import FloorSource
    from spark_connector import PulsarDataSource

    conf = json.loads(args.spark_conf)
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PulsarDataSource)
    spark.dataSource.register(FloorSource)
    base = spark.read.format("pulsar").option("service.url", args.url).option("admin.url", args.admin_url) \
        .option("topic", args.topic)
    df = base.load()
    direct = base.option("readMode", "direct").option("metadata.url", f"rocksdb://{args.metadata}").load()
    tasks = df.rdd.getNumPartitions()
    floor = spark.read.format("spark_floor").option("rows", str(args.messages)).option("tasks", str(tasks)).load()
    if not Path(args.parquet).exists():
        df.write.parquet(args.parquet)
    counts: dict[str, Callable[[], Any]] = {
        "broker": df.count, "direct": direct.count, "floor": floor.count,
        "parquet": lambda: spark.read.parquet(args.parquet).selectExpr("count(value)").collect()[0][0],
    }
    for fn in counts.values():
        fn()  # warm-up: Python workers start, modules load
    out: dict[str, Any] = {"tasks": tasks, "wall": {}, "cpu_spark": {}, "cpu_jvm": {}, "cpu_server": {}}
    for _ in range(args.repeat):
        for name, fn in counts.items():
            pids = descendants(os.getpid())
            before, server0 = tree_cpu(pids), cpu_s(args.server_pid)
            t0 = time.perf_counter()
            got = fn()
            wall = time.perf_counter() - t0
            after = tree_cpu(descendants(os.getpid()))
            assert got == args.messages, (name, got)
            out["wall"].setdefault(name, []).append(round(wall, 4))
            out["cpu_spark"].setdefault(name, []).append(
                round(sum(v - before.get(p, 0.0) for p, v in after.items()), 3))
            out["cpu_jvm"].setdefault(name, []).append(
                round(sum(v - before.get(p, 0.0) for p, v in after.items() if is_jvm(p)), 3))
            out["cpu_server"].setdefault(name, []).append(round(cpu_s(args.server_pid) - server0, 3))
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    ap = paired_parser(__doc__ or "", rounds=3, repeat=2, repeat_help="interleaved counts per child",
                       child_options=("url", "admin-url", "metadata", "parquet", "topic"))
    ap.add_argument("--spark-conf", default="{}", help="JSON of Spark settings for both checkouts")
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    loads = [round(os.getloadavg()[0], 1)]
    results: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    with filled_standalone(args.messages, "bench-spark-ab-") as (proc, url, admin_url, root):
        for r, name, co in paired_runs(args.base, args.rounds):
            got = run_child(str(REPO / "bench" / "bench_spark_ab.py"), co, [
                "--url", url, "--admin-url", admin_url, "--metadata", str(root / "data" / "metadata"),
                "--parquet", str(root / "reference.parquet"), "--topic", "bench-spark",
                "--server-pid", str(proc.pid), "--messages", str(args.messages),
                "--repeat", str(args.repeat), "--spark-conf", args.spark_conf])
            got["load_1m"] = round(os.getloadavg()[0], 1)
            results[name].append(got)
            loads.append(got["load_1m"])
            w = got["wall"]
            print(f"round {r} {name}: " + ", ".join(
                f"{k} {min(v):.3f}s ({min(v) / min(w['parquet']):.2f}x) cpu {statistics.median(got['cpu_spark'][k]):.2f}"
                f" (jvm {statistics.median(got['cpu_jvm'][k]):.2f})+{statistics.median(got['cpu_server'][k]):.2f}"
                for k, v in w.items()) + f" load {got['load_1m']}", flush=True)

    summary: dict[str, Any] = {"messages": args.messages, "rounds": args.rounds, "repeat": args.repeat,
                               "spark_conf": json.loads(args.spark_conf), "load_1m": loads}
    for name, runs in results.items():
        s: dict[str, Any] = {}
        for k in runs[0]["wall"]:
            walls = [t for r in runs for t in r["wall"][k]]
            ratios = [min(r["wall"][k]) / min(r["wall"]["parquet"]) for r in runs]
            s[k] = {"best_s": min(walls), "median_s": round(statistics.median(walls), 4),
                    "over_parquet_per_run": [round(x, 2) for x in ratios],
                    "cpu_spark_s_median": round(statistics.median(c for r in runs for c in r["cpu_spark"][k]), 3),
                    "cpu_jvm_s_median": round(statistics.median(c for r in runs for c in r["cpu_jvm"][k]), 3),
                    "cpu_server_s_median": round(statistics.median(c for r in runs for c in r["cpu_server"][k]), 3)}
        summary[name] = s
    print(json.dumps(summary, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
