"""Paired A/B of ``clients/`` against a base checkout and the official client, one broker.

One ``quire standalone`` (this checkout); then, repeated and interleaved (a different variant
first each round), the peers workloads (bench/peers/workloads.py) in fresh worker processes:
``official`` (pulsar-client), ``base`` (``clients/`` of ``--base``, e.g. a checkout of main) and
``ours`` (``clients/`` of this checkout). The consume workload reads a topic the official client
filled just before (window-1000, batching on). Prints per-variant medians of msg/s, sync p50 and
client CPU µs per message, and ratios to the official client; ``--json`` writes the raw runs.

    .venv/bin/python bench/ab_clients.py --base /work/wt/base --workloads consume --size 1024
    .venv/bin/python bench/ab_clients.py --base /work/wt/base --workloads latency --latency-messages 5000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_clients import child_json, start_standalone  # noqa: E402


def worker(tree: Path, system: str, workload: str, url: str, topic: str, size: int, messages: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.peers.workloads", system, workload, "--address", url,
            "--stream", topic, "--size", str(size), "--messages", str(messages), "--window", "1000"]
    return child_json(argv, tree, f"{tree} {system} {workload}")


def p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="a checkout whose clients/ is the reference")
    parser.add_argument("--workloads", default="latency,consume", help="latency, produce (or window), consume")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--latency-messages", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    variants = {
        "official": (REPO, "quire-official"),
        "base": (args.base.resolve(), "quire-clients"),
        "ours": (REPO, "quire-clients"),
    }
    root = Path(tempfile.mkdtemp(prefix="ab-clients-"))
    proc, url = start_standalone(root)
    # "window" is what issue 17 calls the produce workload (window-1000): an alias.
    works = ["produce" if w == "window" else w for w in args.workloads.split(",")]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {w: {v: [] for v in variants} for w in works}
    try:
        for rep in range(args.repeats):
            names = list(variants)
            order = names[rep % 3:] + names[:rep % 3]
            for work in runs:
                for name in order:
                    tree, system = variants[name]
                    topic = f"ab-{work}-{name}-{uuid.uuid4().hex[:8]}"
                    if work == "consume":
                        worker(REPO, "quire-official", "produce", url, topic, args.size, args.messages)
                    n = args.latency_messages if work == "latency" else args.messages
                    r = worker(tree, system, work, url, topic, args.size, n)
                    if "latencies_us" in r:
                        r["p50_us"] = p50(r.pop("latencies_us"))
                    runs[work][name].append(r)
                    print(f"{rep} {work:>8} {name:>8}: {r['msg_per_s']:>10,.0f} msg/s  "
                          f"cpu {r['cpu_us_per_msg']:>7.1f} µs/msg" + (f"  p50 {r['p50_us']:.0f} µs" if "p50_us" in r else ""),
                          flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedians ({args.repeats} runs, {args.size} B, {args.messages} messages to consume, "
          f"{args.latency_messages} one at a time; load {os.getloadavg()[0]:.2f})")
    for work, by in runs.items():
        off = by["official"]
        for name, rs in by.items():
            rate = statistics.median(r["msg_per_s"] for r in rs)
            cpu = statistics.median(r["cpu_us_per_msg"] for r in rs)
            line = f"{work:>8} {name:>8}: {rate:>10,.0f} msg/s ({rate / statistics.median(r['msg_per_s'] for r in off):.2f}x official)"
            line += f"  cpu {cpu:.1f} µs/msg ({cpu / statistics.median(r['cpu_us_per_msg'] for r in off):.2f}x)"
            if "p50_us" in rs[0]:
                lat = statistics.median(r["p50_us"] for r in rs)
                line += f"  p50 {lat:.0f} µs ({lat / statistics.median(r['p50_us'] for r in off):.2f}x)"
            print(line)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
