"""Paired A/B of ``bench/bench_cluster_latency.py`` between checkouts on a shared machine.

Runs each checkout's own bench (its code, PYTHONPATH=that checkout) in interleaved rounds,
alternating the order (A B, B A, ...) so both see the same load drift, and prints per round
and as medians: p50/p99 and the CPU per message of the broker and per add of a bookie (CPU
time from /proc/PID/stat: robust to a shared machine, latency is not). Writes the rounds as JSON.

    .venv/bin/python bench/ab_cluster_latency.py --repo /work/wt/base --repo . [--rounds 3]
        [--messages 2000] [--journals tmpfs,disk]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(repo: Path, messages: int, journals: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = Path(tmp.name)
    try:
        subprocess.run([sys.executable, str(repo / "bench" / "bench_cluster_latency.py"), "--messages", str(messages),
                        "--journals", journals, "--disk-rounds", "0", "--out", str(out)],
                       cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", type=Path, help="a checkout (give two or more)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--journals", default="tmpfs,disk")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "ab_cluster_latency.json"))
    args = ap.parse_args()
    repos = [r.resolve() for r in (args.repo or [REPO])]
    modes = args.journals.split(",")
    rows: dict[str, dict[str, list[dict]]] = {str(r): {m: [] for m in modes} for r in repos}
    for i in range(args.rounds):
        order = repos if i % 2 == 0 else repos[::-1]
        for repo in order:
            load = os.getloadavg()[0]
            result = run_once(repo, args.messages, args.journals)
            for m in modes:
                r = result[m]
                row = {"p50_us": r["p50_us"], "p99_us": r["p99_us"], "bookie_us_per_add": r["bookie_cpu_us_per_add"],
                       "broker_us_per_msg": r["cpu_us_per_msg"]["broker0"], "load": load}
                rows[str(repo)][m].append(row)
                print(f"round {i + 1} {repo.name:<12} {m:<5} load {load:4.1f}  p50 {row['p50_us']:7,.0f}  "
                      f"p99 {row['p99_us']:7,.0f} µs  broker {row['broker_us_per_msg']:4.0f} µs/msg  "
                      f"bookie {row['bookie_us_per_add']:4.0f} µs/add", flush=True)
    print("medians:")
    for repo, by_mode in rows.items():
        for m, rs in by_mode.items():
            med = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p99_us", "broker_us_per_msg",
                                                                     "bookie_us_per_add")}
            print(f"  {Path(repo).name:<12} {m:<5} p50 {med['p50_us']:7,.0f}  p99 {med['p99_us']:7,.0f} µs  "
                  f"broker {med['broker_us_per_msg']:4.0f} µs/msg  bookie {med['bookie_us_per_add']:4.0f} µs/add")
    Path(args.out).write_text(json.dumps({"messages": args.messages, "rounds": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
