"""quire next to the queues users would pick instead: Redis 7 Streams, RabbitMQ streams, NATS
JetStream, with the same workloads and their usual Python clients (issue 17).

    bash bench/peers/install.sh                   # Debian packages + the [peers] extra, once
    .venv/bin/python bench/peers/run.py --quick   # a small run (2,000 messages)
    .venv/bin/python bench/peers/run.py           # 100,000 messages per workload

Every system runs on loopback from a temporary data dir and is stopped by PID (servers.py).
Workloads (workloads.py), the same for every system: one producer publishing one message at a
time (latency CDF, p50/p99, at 100 B and 1 KiB); one producer with at most 1,000
unacknowledged (window-1000 throughput at 100 B and 1 KiB); one consumer reading that back.
quire runs with the official ``pulsar-client`` and with ``clients/`` (its blocking API), the two
interleaved workload by workload, ``--repeats`` times each (alternating which goes first), so
that their ratio is measured under the same machine load. Each measurement is a fresh worker
process. Writes bench/results/peers.json, bench/results/peers.md and one latency CDF PNG per
message size (bench/results/peers_latency_cdf_{100,1024}B.png). Not run by CI.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.peers import report, servers  # noqa: E402

LABELS = {
    "quire-official": "quire standalone + official pulsar-client",
    "quire-clients": "quire standalone + `clients/` blocking API",
    "quire-clients-async": "quire standalone + `clients/` async (trio) API",
    "quire-clients-batch": "quire standalone + `clients/` blocking send_many/receive_many",
    "redis": "Redis Streams, appendfsync always",
    "rabbitmq": "RabbitMQ stream (no fsync)",
    "nats": "NATS JetStream, file storage (no fsync per message)",
}
QUIRE_CLIENTS = ["quire-official", "quire-clients", "quire-clients-async", "quire-clients-batch"]
NO_LATENCY = {"quire-clients-batch"}  # a batch call is not a one-at-a-time publish
SYSTEM_SERVER = {**{k: "quire" for k in QUIRE_CLIENTS}, "redis": "redis",
                 "rabbitmq": "rabbitmq", "nats": "nats"}
# Ratios reported for quire's clients: (numerator, denominator, title).
RATIOS = [
    ("quire-clients", "quire-official", "`clients/` blocking ÷ official"),
    ("quire-clients", "quire-clients-async", "`clients/` blocking ÷ `clients/` async"),
    ("quire-clients-batch", "quire-official", "`clients/` batch API ÷ official"),
]


def run_worker(system: str, workload: str, address: str, stream: str, size: int, messages: int,
               window: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.peers.workloads", system, workload, "--address", address,
            "--stream", stream, "--size", str(size), "--messages", str(messages), "--window", str(window)]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1800,
                         env={**_env(), "PYTHONPATH": str(REPO)})
    if out.returncode != 0:
        raise RuntimeError(f"{system} {workload} {size} B failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    rate = f"{result['msg_per_s']:>10,.0f} msg/s"
    extra = ""
    if "latencies_us" in result:
        lat = sorted(result["latencies_us"])
        extra = f"  p50 {report.percentile(lat, 50):,.0f} µs  p99 {report.percentile(lat, 99):,.0f} µs"
    print(f"  {system:>15} {workload:>8} {size:>5} B: {rate}{extra}", flush=True)
    return result


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def measure(systems: list[str], server_address: dict[str, str], args: argparse.Namespace,
            raw: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """The workloads for ``systems`` sharing one server; with several (quire's clients) they
    alternate run by run, a different one first every repeat."""
    repeats = args.repeats if len(systems) > 1 else 1
    for work in ("latency", "produce"):
        for size in report.SIZES:
            n = args.latency_messages if work == "latency" else args.messages
            for rep in range(repeats):
                k = rep % len(systems)
                order = systems[k:] + systems[:k]  # each client goes first in turn
                for system in order:
                    if work == "latency" and system in NO_LATENCY:
                        continue
                    address = server_address[SYSTEM_SERVER[system]]
                    stream = f"peers-{work}-{size}-{system}-{uuid.uuid4().hex[:6]}"
                    result = run_worker(system, work, address, stream, size, n, args.window)
                    raw[system].setdefault(f"{work}_{size}", []).append(result)
                    if work == "produce":
                        consumed = run_worker(system, "consume", address, stream, size, n, args.window)
                        raw[system].setdefault(f"consume_{size}", []).append(consumed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 messages per workload, one repeat")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--latency-messages", type=int, default=None,
                        help="messages of the one-at-a-time workload (default: --messages)")
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs per quire client")
    parser.add_argument("--systems", default="quire,redis,rabbitmq,nats")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--stem", default="peers")
    parser.add_argument("--render-only", action="store_true",
                        help="re-write the Markdown and PNGs from the JSON of an earlier run")
    args = parser.parse_args()
    if args.render_only:
        doc = json.loads((args.out_dir / f"{args.stem}.json").read_text())
        doc["durability"] = {k: servers.DURABILITY[SYSTEM_SERVER[k]] for k in doc["results"]}
        (args.out_dir / f"{args.stem}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        write_outputs(doc, args.out_dir, args.stem)
        return
    if args.quick:
        args.messages, args.repeats = 2000, 1
    if args.latency_messages is None:
        args.latency_messages = args.messages

    root = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    versions: dict[str, str] = {}
    started = time.time()
    try:
        for name in args.systems.split(","):
            print(f"{name}: starting", flush=True)
            server = servers.STARTERS[name](root)
            print(f"{name}: {server.address} pids {server.pids()}", flush=True)
            versions[name] = _version(name)
            try:
                members = list(QUIRE_CLIENTS) if name == "quire" else [name]
                for m in members:
                    raw[m] = {}
                measure(members, {name: server.address}, args, raw)
            finally:
                server.stop()
                print(f"{name}: stopped", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    summary = report.summarize(raw)
    client_ratios = {title: report.ratios(summary, a, b) for a, b, title in RATIOS if a in summary and b in summary}
    labels = {k: v for k, v in LABELS.items() if k in summary}
    doc = {
        "settings": {"messages": args.messages, "latency_messages": args.latency_messages, "window": args.window,
                     "repeats_quire_clients": args.repeats, "quick": args.quick},
        "machine": {"python": platform.python_version(), "cpus": _cpus(), "platform": platform.platform()},
        "versions": versions,
        "durability": {k: servers.DURABILITY[SYSTEM_SERVER[k]] for k in summary},
        "labels": labels,
        "results": summary,
        "ratios": client_ratios,
        "seconds": round(time.time() - started, 1),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.stem}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    write_outputs(doc, args.out_dir, args.stem)


def write_outputs(doc: dict[str, Any], out_dir: Path, stem: str) -> None:
    md = render_markdown(doc)
    (out_dir / f"{stem}.md").write_text(md)
    pngs = report.plot_cdfs(doc["results"], doc["labels"], out_dir, stem)
    print()
    print(md)
    print("wrote", out_dir / f"{stem}.json", out_dir / f"{stem}.md", *pngs)


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    parts = [
        f"Messages per workload: {s['messages']:,} (one-at-a-time: {s['latency_messages']:,}); "
        f"window {s['window']:,}; quire's clients interleaved, median of {s['repeats_quire_clients']} runs each. "
        "Sync: publish one message at a time, each waiting for its acknowledgement (quire: batching off). "
        "Window-1000: at most 1,000 unacknowledged (quire: batching on, default limits). "
        "Consume: one consumer reads the window-1000 run's messages back (quire: acknowledging each).\n",
        report.markdown_table(doc["results"], doc["labels"]),
        "\n",
        report.cpu_table(doc["results"], doc["labels"]),
        "\nDurability (what an acknowledgement means):\n",
        *(f"- {doc['labels'][k]}: {v}\n" for k, v in doc["durability"].items()),
        "\nVersions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()) + "\n",
    ]
    for title, r in doc["ratios"].items():
        parts += ["\n", report.ratio_table(r, f"{title}, same run")]
    return "".join(parts)


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def _version(name: str) -> str:
    cmds = {"redis": ["redis-server", "--version"], "nats": ["nats-server", "--version"],
            "rabbitmq": ["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"]}
    if name == "quire":
        try:
            import pulsar

            return f"this checkout; pulsar-client {pulsar.__version__}"
        except Exception:
            return "this checkout"
    try:
        return subprocess.run(cmds[name], capture_output=True, text=True, timeout=10).stdout.strip()[:80]
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
