"""Where a one-at-a-time publish spends its time on a cluster (3 bookies, 1 broker, E=WQ=AQ=2).

Starts the cluster with ``QUIRE_HOP_TRACE`` set (see quire/hop_trace.py), publishes
``--messages`` 100 B messages one at a time with the official client, stops every process with
SIGTERM (they write their rows at exit) and prints, per hop, the p50 / p90 / p99 / max in µs
over the messages, plus the hops of the slowest messages. Hops (the slower bookie of the two is
the one on the critical path):

    client send -> broker takes the SEND (topic.publish) -> push (ledger handle) -> bookie
    request written -> bookie rx -> journal group write starts -> durable (reply encoded) ->
    reply written -> broker rx of the reply -> AQ complete -> receipt made -> client returns

    .venv/bin/python bench/trace_cluster_hops.py [--messages 2000] [--rate 500] [--chaos-settings]
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HOPS = ["client->b.send", "b.send->push", "push->bk.sent", "bk.sent->k.rx", "k.rx->k.flush", "k.flush->k.ack",
        "k.ack->k.out", "k.out->b.bkrx", "b.bkrx->aq", "aq->receipt", "receipt->client", "total"]


def load(trace_dir: Path) -> dict[int, list[tuple[int, str, int, int]]]:
    rows: dict[int, list[tuple[int, str, int, int]]] = {}
    for f in trace_dir.glob("*.tsv"):
        out = rows.setdefault(int(f.stem), [])
        for line in f.read_text().splitlines():
            t, h, a, b = line.split("\t")
            out.append((int(t), h, int(a), int(b)))
        out.sort()
    return rows


def after(times: list[int], t: int) -> int | None:
    """The first time in sorted ``times`` at or after ``t``."""
    i = bisect.bisect_left(times, t)
    return times[i] if i < len(times) else None


def before(times: list[int], t: int) -> int | None:
    i = bisect.bisect_right(times, t)
    return times[i - 1] if i else None


def analyse(client: list[tuple[int, int, int]], rows: dict[int, list[tuple[int, str, int, int]]],
            broker_pid: int, bookie_ports: dict[int, int]) -> list[dict[str, float]]:
    b = rows[broker_pid]
    send_at = {a: t for t, h, a, _ in b if h == "b.send"}
    receipt = {a: (t, e) for t, h, a, e in b if h == "b.receipt"}
    push = {a: t for t, h, a, _ in b if h == "b.push"}
    aq = {a: t for t, h, a, _ in b if h == "b.aq"}
    bkq: dict[tuple[int, int], int] = {(a, p): t for t, h, a, p in b if h == "b.bkq"}
    bkout: dict[int, list[int]] = collections.defaultdict(list)
    bkrx: dict[int, list[int]] = collections.defaultdict(list)
    for t, h, a, _ in b:
        if h == "b.bkout":
            bkout[a].append(t)
        elif h == "b.bkrx":
            bkrx[a].append(t)
    bookie: dict[int, dict[str, object]] = {}
    for pid, port in bookie_ports.items():
        r = rows.get(pid, [])
        bookie[port] = {
            "rx": {a: (bb, t) for t, h, a, bb in r if h == "k.rx"},
            "flush": [t for t, h, _, _ in r if h == "k.flush"],
            "ack": {a: t for t, h, a, _ in r if h == "k.ack"},
            "out": [t for t, h, _, _ in r if h == "k.out"],
        }
    out = []
    for seq, t0, t1 in client:
        if seq not in receipt or seq not in send_at:
            continue
        rt, eid = receipt[seq]
        if eid not in push or eid not in aq:
            continue
        chains = []
        for port, k in bookie.items():
            if (eid, port) not in bkq:
                continue
            sent = after(bkout[port], bkq[(eid, port)])
            krx = k["rx"].get(eid)  # type: ignore[attr-defined]
            kack = k["ack"].get(eid)  # type: ignore[attr-defined]
            if sent is None or krx is None or kack is None:
                continue
            kflush = before(k["flush"], kack)  # type: ignore[arg-type]
            kout = after(k["out"], kack)  # type: ignore[arg-type]
            brx = before(bkrx[port], aq[eid])  # (the reply may be read before the bookie's write returned)
            if kflush is None or kout is None or brx is None:
                continue
            chains.append((brx, sent, krx[0], kflush, kack, kout))
        if not chains:
            continue
        brx, sent, krx_t, kflush, kack, kout = max(chains)
        pts = [t0, send_at[seq], push[eid], sent, krx_t, kflush, kack, kout, brx, aq[eid], rt, t1]
        d = {name: (pts[i + 1] - pts[i]) / 1000 for i, name in enumerate(HOPS[:-1])}
        d["total"] = (t1 - t0) / 1000
        out.append(d)
    return out


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))]


def report(hops: list[dict[str, float]]) -> str:
    lines = [f"{len(hops)} messages traced; µs per hop", f"{'hop':18} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}"]
    for name in HOPS:
        v = [h[name] for h in hops]
        lines.append(f"{name:18} {pct(v, .5):8.0f} {pct(v, .9):8.0f} {pct(v, .99):8.0f} {max(v):8.0f}")
    lines.append("slowest 10 messages (µs per hop, in the order above):")
    for h in sorted(hops, key=lambda h: h["total"])[-10:]:
        lines.append("  " + " ".join(f"{h[name]:.0f}" for name in HOPS))
    return "\n".join(lines)


def gc_report(rows: dict[int, list[tuple[int, str, int, int]]], names: dict[int, str], t0: int, t1: int) -> str:
    """Garbage collections per process during the measured sends: count and pause per generation."""
    lines = ["garbage collections during the sends (count, total ms, max ms per generation):"]
    for pid, name in names.items():
        started: int | None = None
        per_gen: dict[int, list[float]] = collections.defaultdict(list)
        for t, h, gen, _ in rows.get(pid, []):
            if h == "gc.start":
                started = t
            elif h == "gc.stop" and started is not None and t0 <= started <= t1:
                per_gen[gen].append((t - started) / 1e6)
        lines.append(f"  {name:12} " + "  ".join(
            f"gen{g}: {len(v)} / {sum(v):.1f} / {max(v):.2f}" for g, v in sorted(per_gen.items())))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--chaos-settings", action="store_true", help="the chaos run's topology (a rollover per 100 entries)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="trace-cluster-"))
    trace_dir = base / "trace"
    trace_dir.mkdir()
    os.environ["QUIRE_HOP_TRACE"] = str(trace_dir)  # inherited by every quire process
    import pulsar

    from tests.chaos.topology import ClusterTopology

    topo = ClusterTopology.start(base, bookies=3, brokers=1, chaos_settings=args.chaos_settings)
    try:
        bookie_ports = {p.pid: p.ready_port for p in topo.targets["bookie"].values()}
        broker_pid = topo.targets["broker"]["broker0"].pid
        client = pulsar.Client(topo.service_url)
        producer = client.create_producer(f"persistent://public/default/trace-{time.time_ns()}", batching_enabled=False)
        payload = os.urandom(100)
        for _ in range(100):
            producer.send(payload)  # warm-up: sequence ids 0..99
        times = []
        interval = 1.0 / args.rate
        next_at = time.perf_counter()
        for i in range(args.messages):
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            t0 = time.monotonic_ns()
            producer.send(payload)
            times.append((100 + i, t0, time.monotonic_ns()))
            next_at += interval
        producer.close()
        client.close()
        for kind in ("broker", "bookie"):
            for p in topo.targets[kind].values():
                p.terminate()
        rows = load(trace_dir)
        hops = analyse(times, rows, broker_pid, bookie_ports)
        print(report(hops))
        names = {broker_pid: "broker", **{pid: f"bookie:{port}" for pid, port in bookie_ports.items()}}
        t_first, t_last = times[0][1], times[-1][2]
        print(gc_report(rows, names, t_first, t_last))
    finally:
        topo.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
