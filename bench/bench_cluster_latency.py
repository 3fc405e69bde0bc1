"""One-at-a-time publish latency on a cluster: ZooKeeper, 3 bookies and 1 broker on loopback,
E=WQ=AQ=2 (each add goes to two bookie processes over TCP and both journals fsync it).

The official client publishes ``--messages`` 100 B messages with batching off at ``--rate``
msg/s; prints p50/p99 (issue 17's goal: p99 <= 1.5 ms) and the broker's and bookies' CPU per
message, and writes bench/results/bench_cluster_latency.json.

    .venv/bin/python bench/bench_cluster_latency.py [--messages 2000] [--rate 500]
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_e2e import cpu_seconds, paced_send_latencies  # noqa: E402
from tests.chaos.topology import ClusterTopology  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_cluster_latency.json"))
    args = ap.parse_args()
    import pulsar

    base = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    topo = ClusterTopology.start(base, bookies=3, brokers=1)
    try:
        assert topo.procs is not None
        pids = {name: proc.pid for kind in ("bookie", "broker") for name, proc in topo.targets[kind].items()}
        client = pulsar.Client(topo.service_url)
        producer = client.create_producer(f"persistent://public/default/cluster-lat-{time.time_ns()}", batching_enabled=False)
        payload = os.urandom(100)
        for _ in range(100):
            producer.send(payload)  # warm-up: topic loaded, ledger open, connections made
        cpu0 = {n: cpu_seconds(p) for n, p in pids.items()}
        lat = paced_send_latencies(producer.send, payload, args.messages, args.rate)
        cpu = {n: (cpu_seconds(p) - cpu0[n]) / args.messages * 1e6 for n, p in pids.items()}
        producer.close()
        client.close()
    finally:
        topo.close()
        shutil.rmtree(base, ignore_errors=True)
    lat.sort()
    n = len(lat)
    result = {"messages": n, "rate": args.rate, "p50_ms": lat[n // 2] * 1e3, "p99_ms": lat[int(n * 0.99)] * 1e3,
              "mean_ms": statistics.mean(lat) * 1e3, "cpu_us_per_msg": cpu, "goal_p99_ms": 1.5,
              "load_avg": os.getloadavg()}
    print(f"cluster (3 bookies, E=WQ=AQ=2) sync publish: p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms "
          f"(goal p99 <= 1.5 ms) | CPU us/msg: " + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
