"""CPU of the Spark connector's batch read without Spark: a base checkout vs this one, paired.

One ``quire standalone`` (this checkout's server) is filled once with N 100-byte messages on 4
partitions (batching producer); then rounds alternate a child process per checkout that plans the
read (``PulsarBatchReader.partitions()``) and reads every input partition in-process, as Spark's
tasks would (fetch and column-wise decode into Arrow record batches), ``--repeat`` times after
one warm-up, in both read modes. Per read it records the child's CPU seconds (the task's thread
and the fetcher's) and the standalone's (broker dispatch or bookie reads), from /proc. Less noisy
than timing Spark on a shared machine, and it isolates what the connector spends.

    .venv/bin/python bench/bench_spark_read_cpu.py --base /work/wt/base [--messages 1000000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench_spark_ab import cpu_s, filled_standalone, paired_parser, paired_runs, run_child  # this script's folder: a child too



def child(args: argparse.Namespace) -> None:
    """Reads with the checkout first on PYTHONPATH."""
    from spark_connector.batch import PulsarBatchReader
    from spark_connector.options import parse_options

    out: dict[str, list[tuple[float, float]]] = {}
    for mode in ("broker", "direct"):
        raw = {"service.url": args.url, "admin.url": args.admin_url, "topic": args.topic}
        if mode == "direct":
            raw.update({"readMode": "direct", "metadata.url": f"rocksdb://{args.metadata}"})
        reader = PulsarBatchReader(parse_options(raw, purpose="read"))
        parts = reader.partitions()
        for i in range(args.repeat + 1):
            c0, s0, rows = time.process_time(), cpu_s(args.server_pid), 0
            for p in parts:
                for batch in reader.read(p):
                    rows += batch.num_rows
            assert rows == args.messages, (mode, rows)
            if i:  # the first read warms up (imports, caches)
                out.setdefault(mode, []).append((round(time.process_time() - c0, 3),
                                                 round(cpu_s(args.server_pid) - s0, 3)))
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    ap = paired_parser(__doc__ or "", rounds=4, repeat=3, repeat_help="reads per mode per child",
                       child_options=("url", "admin-url", "metadata", "topic"))
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    loads = [round(os.getloadavg()[0], 1)]
    with filled_standalone(args.messages, "bench-spark-read-cpu-") as (proc, url, admin_url, root):
        for r, name, co in paired_runs(args.base, args.rounds):
            runs[name].append(run_child(str(Path(__file__).resolve()), co, [
                "--url", url, "--admin-url", admin_url, "--metadata", str(root / "data" / "metadata"),
                "--topic", "bench-spark", "--server-pid", str(proc.pid), "--messages", str(args.messages),
                "--repeat", str(args.repeat)]))
            loads.append(round(os.getloadavg()[0], 1))
            print(f"round {r} {name}: {runs[name][-1]} load {loads[-1]}", flush=True)

    summary: dict[str, Any] = {"messages": args.messages, "rounds": args.rounds, "repeat": args.repeat, "load_1m": loads}
    for name, got in runs.items():
        for mode in ("broker", "direct"):
            xs = [x for g in got for x in g[mode]]
            summary.setdefault(name, {})[mode] = {
                "reader_cpu_s_median": statistics.median(a for a, _ in xs), "reader_cpu_s_min": min(a for a, _ in xs),
                "server_cpu_s_median": statistics.median(b for _, b in xs)}
    for mode in ("broker", "direct"):
        summary[f"{mode}_reader_cpu_this_over_base"] = round(
            summary["this"][mode]["reader_cpu_s_median"] / summary["base"][mode]["reader_cpu_s_median"], 3)
    print(json.dumps(summary, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
