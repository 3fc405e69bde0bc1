"""Paired A/B of the standalone server's publish path: window-1000 msg/s and server CPU per message.

Starts one ``quire standalone`` from ``--base`` (e.g. a checkout of main) and one from this
checkout, then, repeated and interleaved (the other server first each round), runs the peers
``produce`` workload (window-1000, batching on) with this checkout's ``clients/`` against each.
Server CPU comes from /proc/PID/task/*/stat (utime + stime of every thread) before and after
each run, so the figure is the server's own cost per message, by thread name too. With
``--consume`` each run also reads its topic back from the start (consume msg/s; what is past the
broker's entry cache comes from the bookie)::

    .venv/bin/python bench/ab_server_window.py --base /work/wt/base --size 1024 --repeats 4
    .venv/bin/python bench/ab_server_window.py --base /work/wt/base --size 1024 --consume
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
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_clients import child_json, start_standalone  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> Counter[str]:
    """CPU seconds per thread name (threads of one name summed), utime + stime; ``user`` and
    ``sys`` are the totals of each (the kernel's part is mostly copies into the page cache)."""
    out: Counter[str] = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] += (int(fields[11]) + int(fields[12])) / TICK
        out["user"] += int(fields[11]) / TICK
        out["sys"] += int(fields[12]) / TICK
    # minor page faults (fields[7] of the process, all threads): a fresh large buffer costs one
    # per 4 KiB touched, in the kernel's time
    out["faults"] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    return out


def workload(work: str, url: str, topic: str, size: int, messages: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.peers.workloads", "quire-clients", work, "--address", url,
            "--stream", topic, "--size", str(size), "--messages", str(messages), "--window", "1000"]
    return child_json(argv, REPO, work)


def run_one(proc: subprocess.Popen, url: str, size: int, messages: int, consume: bool = False) -> dict[str, Any]:
    before = thread_cpu(proc.pid)
    topic = f"abw-{uuid.uuid4().hex[:8]}"
    r = workload("produce", url, topic, size, messages)
    after = thread_cpu(proc.pid)
    faults = after.pop("faults") - before.pop("faults")
    by = {k: round((after[k] - before.get(k, 0.0)) / messages * 1e6, 2) for k in after}
    r["server_faults_per_msg"] = round(faults / messages, 3)
    r["server_user_us"], r["server_sys_us"] = by.pop("user"), by.pop("sys")
    r["server_us_per_msg"] = round(sum(by.values()), 2)
    r["server_threads_us"] = {k: v for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v > 0}
    r["load1"] = round(os.getloadavg()[0], 2)
    if consume:  # read the topic back from its start (older entries: bookie, maybe the disk)
        r["consume_msg_per_s"] = workload("consume", url, topic, size, messages)["msg_per_s"]
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the checkout whose server is the reference")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--consume", action="store_true", help="also read each topic back (consume msg/s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = {"base": args.base.resolve(), "ours": REPO}
    roots = {name: Path(tempfile.mkdtemp(prefix=f"ab-server-{name}-")) for name in trees}
    servers = {name: start_standalone(roots[name], tree) for name, tree in trees.items()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    try:
        for name, (proc, url) in servers.items():  # warm-up: first ledger, JIT-free but caches
            run_one(proc, url, args.size, min(args.messages, 20_000))
        for rep in range(args.repeats):
            order = list(trees) if rep % 2 == 0 else list(trees)[::-1]
            for name in order:
                proc, url = servers[name]
                r = run_one(proc, url, args.size, args.messages, args.consume)
                runs[name].append(r)
                top = ", ".join(f"{k} {v}" for k, v in list(r["server_threads_us"].items())[:4])
                print(f"{rep} {name:>4}: {r['msg_per_s']:>10,.0f} msg/s  server {r['server_us_per_msg']:6.2f} µs/msg "
                      f"(user {r['server_user_us']}, sys {r['server_sys_us']}, faults {r['server_faults_per_msg']}; {top})  client {r['cpu_us_per_msg']} µs  load {r['load1']}", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedians ({args.repeats} runs, {args.size} B, {args.messages} messages; load {os.getloadavg()})")
    for name, rs in runs.items():
        print(f"{name:>4}: {statistics.median(r['msg_per_s'] for r in rs):>10,.0f} msg/s  "
              f"server {statistics.median(r['server_us_per_msg'] for r in rs):.2f} µs/msg "
              f"(user {statistics.median(r['server_user_us'] for r in rs):.2f}, "
              f"sys {statistics.median(r['server_sys_us'] for r in rs):.2f}, "
              f"faults {statistics.median(r['server_faults_per_msg'] for r in rs):.3f})  "
              f"client {statistics.median(r['cpu_us_per_msg'] for r in rs):.2f} µs/msg"
              + (f"  consume {statistics.median(r['consume_msg_per_s'] for r in rs):,.0f} msg/s" if args.consume else ""))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
