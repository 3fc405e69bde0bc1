"""Our client vs the official ``pulsar-client`` against the same ``quire standalone``, same run.

Runs ``quire perf produce`` (batching on, as fast as possible with 1,000 pending) for each
client on its own topic for the same duration, at 100 B and 1 KiB, then ``quire perf consume``
of a pre-filled backlog (from earliest) for each client. Each run is a separate
``quire perf`` subprocess so both clients get a fresh process. Prints msg/s, MB/s and latency
percentiles and process CPU time per message per client and the ratios quire/official, and writes
bench/results/bench_clients.json.

    .venv/bin/python bench/bench_clients.py [--seconds 8] [--consume-messages 50000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standalone(root: Path, tree: Path = REPO) -> tuple[subprocess.Popen, str]:
    """A ``quire standalone`` of the checkout ``tree`` (this one by default) on free ports."""
    port, web = free_port(), free_port()
    log = open(root / "standalone.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "quire", "standalone", "--data-dir", str(root / "data"), "--port", str(port),
         "--web-port", str(web), "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
         "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tree,
        env=None if tree == REPO else {**os.environ, "PYTHONPATH": str(tree)},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=1):
                return proc, f"pulsar://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("standalone did not start; see " + str(root / "standalone.log"))


def child_json(argv: list[str], tree: Path, what: str) -> dict:
    """Run ``argv`` in the checkout ``tree`` (its code first on the path); its last line of
    output is a JSON result (the A/B benches and probes run each checkout's clients this way)."""
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tree, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def perf(url: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "quire", "perf", *args, "--url", url, "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(f"quire perf {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--consume-messages", type=int, default=50_000)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-clients-"))
    proc, url = start_standalone(root)
    results: dict = {"produce": {}, "consume": {}}
    try:
        for size in (100, 1024):
            row = {}
            for client in ("official", "quire"):
                topic = f"bench-produce-{client}-{size}-{uuid.uuid4().hex[:6]}"
                row[client] = perf(url, "produce", topic, "--client", client, "-s", str(size),
                                   "-t", str(args.seconds))
            row["ratio_msg_per_s"] = ratio(row["quire"]["msg_per_s"], row["official"]["msg_per_s"])
            row["ratio_p99_latency"] = ratio(row["quire"]["latency_ms"]["p99"], row["official"]["latency_ms"]["p99"])
            row["ratio_cpu_per_msg"] = ratio(row["quire"]["cpu_us_per_msg"], row["official"]["cpu_us_per_msg"])
            results["produce"][f"{size}B"] = row
        for client in ("official", "quire"):
            topic = f"bench-consume-{client}-{uuid.uuid4().hex[:6]}"
            # Fill a backlog first (with our producer: the broker stores the same bytes either way).
            perf(url, "consume", topic, "-m", "1", "-t", "1")  # creates the subscription at latest
            perf(url, "produce", topic, "-s", "100", "-m", str(args.consume_messages), "-t", "0")
            results["consume"][client] = perf(url, "consume", topic, "--client", client,
                                              "-m", str(args.consume_messages), "-t", "120")
        c = results["consume"]
        c["ratio_msg_per_s"] = ratio(c["quire"]["msg_per_s"], c["official"]["msg_per_s"])
        c["ratio_cpu_per_msg"] = ratio(c["quire"]["cpu_us_per_msg"], c["official"]["cpu_us_per_msg"])
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)

    print("client benchmark: quire vs official pulsar-client, same broker, same run")
    for size, row in results["produce"].items():
        for client in ("official", "quire"):
            r = row[client]
            print(f"  produce {size:>5} {client:>8}: {r['msg_per_s']:10.1f} msg/s {r['mb_per_s']:8.3f} MB/s"
                  f"  p50 {r['latency_ms']['p50']:.1f} ms  p99 {r['latency_ms']['p99']:.1f} ms"
                  f"  CPU {r['cpu_us_per_msg']:.1f} us/msg")
        print(f"  produce {size:>5} ratio quire/official: throughput {row['ratio_msg_per_s']}x,"
              f" p99 latency {row['ratio_p99_latency']}x, CPU per message {row['ratio_cpu_per_msg']}x")
    for client in ("official", "quire"):
        r = results["consume"][client]
        print(f"  consume  100B {client:>8}: {r['msg_per_s']:10.1f} msg/s {r['mb_per_s']:8.3f} MB/s"
              f"  CPU {r['cpu_us_per_msg']:.1f} us/msg")
    print(f"  consume ratio quire/official: throughput {results['consume']['ratio_msg_per_s']}x,"
          f" CPU per message {results['consume']['ratio_cpu_per_msg']}x")
    out = REPO / "bench" / "results" / "bench_clients.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
