"""Synchronous sends, CPU per thread: ``clients/`` of two checkouts and the official client, paired.

One ``quire standalone`` (this checkout); then, per round and in a rotating order, a fresh worker
process per variant (``ours``: this checkout's ``clients/``, ``base``: ``--base``'s, ``official``:
pulsar-client) sends ``--messages`` messages one at a time (batching off, as the peers latency
workload) and reports the p50, the process's CPU per send and each thread's, from
/proc/self/task/*/schedstat (nanoseconds on CPU) and /proc/self/task/*/stat (user/sys ticks):
``caller`` is the sending thread, ``other`` every other thread (the client's loop or I/O threads);
per send, each also counts voluntary and involuntary context switches (/proc/self/task/*/status:
wakeups after a wait, and preemptions).

``--profile`` (one worker of ``--tree``, no pairing) runs cProfile in the caller and in the
client's loop thread and prints Python calls per send and the most called functions, and counts
the sync sends that did not take the direct write (``send_direct`` returning False)::

``--phases`` (``clients/`` variants) splits each send's wall time at the socket calls of
``clients.connection`` (its ``os`` swapped for a timing shim): ``pre`` from the call to the
frame's ``os.write``, ``write`` that syscall (the kernel's loopback path, which wakes the
broker), ``asleep`` from there to the receipt's ``os.read`` (broker, journal, wake-up), ``post``
from that read to the call's return; medians in µs per send::

    .venv/bin/python bench/probe_sync_send.py --base /work/wt/base --messages 3000 --repeats 5
    .venv/bin/python bench/probe_sync_send.py --profile --tree . --messages 3000
    .venv/bin/python bench/probe_sync_send.py --base /work/wt/base --phases --size 1024
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def _threads() -> dict[int, tuple[int, float, float, int, int, int]]:
    """Per thread id: (ns on CPU, user µs, sys µs, minor page faults, voluntary and involuntary
    context switches: a wakeup after a wait, a preemption)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        except OSError:
            continue
        out[int(tid)] = (ns, int(fields[11]) * TICK_US, int(fields[12]) * TICK_US, int(fields[7]),
                         int(status["voluntary_ctxt_switches"]), int(status["nonvoluntary_ctxt_switches"]))
    return out


class _TimedOs:
    """``os`` for ``clients.connection``: stamps the caller thread's frame write and receipt read."""

    def __init__(self, stamps: dict[str, float]) -> None:
        self._stamps = stamps
        self._me = threading.get_ident()

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        me = threading.get_ident() == self._me
        if me:
            self._stamps["w0"] = time.perf_counter()
        n = os.write(fd, data)
        if me:
            self._stamps["w1"] = time.perf_counter()
        return n

    def read(self, fd: int, size: int) -> bytes:
        if threading.get_ident() == self._me and "w1" in self._stamps:
            self._stamps["r0"] = time.perf_counter()
        return os.read(fd, size)


def _worker(args: argparse.Namespace) -> None:
    if args.system == "official":
        import pulsar
    else:
        import clients as pulsar
    c = pulsar.Client(args.url)
    p = c.create_producer(args.topic, batching_enabled=False)
    data = (b"0123456789abcdef" * (args.size // 16 + 1))[: args.size]
    for _ in range(200):  # warm-up: connection, caches
        p.send(data)
    stamps: dict[str, float] = {}
    if args.phases and args.system != "official":
        import clients.connection as connection_module

        connection_module.os = _TimedOs(stamps)  # type: ignore[assignment]
    fallbacks = [0]
    profs: list[Any] = []
    if args.profile:
        import cProfile

        direct = p._direct

        def counted(msg: Any, cb: Any) -> bool:
            sent = direct(msg, cb)
            if not sent:
                fallbacks[0] += 1
            return sent

        p._direct = counted
        caller, loop = cProfile.Profile(), cProfile.Profile()
        profs = [caller, loop]
        p._loop.run_sync(loop.enable)
        caller.enable()
    me = threading.get_native_id()
    before, cpu0 = _threads(), time.process_time()
    lat = []
    phases: dict[str, list[float]] = {"pre": [], "write": [], "asleep": [], "post": []}
    n = args.messages
    for _ in range(n):
        t0 = time.perf_counter()
        p.send(data)
        t1 = time.perf_counter()
        lat.append((t1 - t0) * 1e6)
        if "r0" in stamps:
            phases["pre"].append(stamps["w0"] - t0)
            phases["write"].append(stamps["w1"] - stamps["w0"])
            phases["asleep"].append(stamps["r0"] - stamps["w1"])
            phases["post"].append(t1 - stamps["r0"])
        stamps.clear()
    cpu, after = time.process_time() - cpu0, _threads()
    if profs:
        profs[0].disable()
        p._loop.run_sync(profs[1].disable)
    p.close()
    c.close()
    per = {"caller": [0.0] * 6, "other": [0.0] * 6}
    for tid, now in after.items():
        b = before.get(tid, (0, 0.0, 0.0, 0, 0, 0))
        row = per["caller" if tid == me else "other"]
        row[0] += (now[0] - b[0]) / 1e3 / n
        for i in range(1, 6):
            row[i] += (now[i] - b[i]) / n
    ordered = sorted(lat)
    result: dict[str, Any] = {"p50_us": round(ordered[n // 2], 1), "p99_us": round(ordered[n * 99 // 100], 1),
                              "mean_us": round(sum(lat) / n, 1), "cpu_us_per_send": round(cpu / n * 1e6, 1)}
    for name, (on_cpu, user, sys_, minflt, vol, invol) in per.items():
        result[name] = {"cpu_us": round(on_cpu, 1), "user_us": round(user, 1), "sys_us": round(sys_, 1),
                        "minflt": round(minflt, 2), "vol_cs": round(vol, 2), "invol_cs": round(invol, 2)}
    if phases["pre"]:  # (sends whose receipt the loop thread read have no "r0": not counted)
        result["phases_us"] = {k: round(statistics.median(v) * 1e6, 1) for k, v in phases.items()}
        result["phases_of"] = len(phases["pre"])
    if profs:
        import pstats

        result["direct_fallbacks"] = fallbacks[0]
        for name, prof in zip(("caller", "loop"), profs):
            stats = pstats.Stats(prof)
            rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
            result[f"{name}_calls_per_send"] = round(sum(v[1] for _, v in rows) / n, 1)
            result[f"{name}_top"] = [
                f"{v[1] / n:.2f} {Path(k[0]).name}:{k[1]}:{k[2]}" for k, v in rows[:25]
            ]
            by_own = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
            result[f"{name}_own_us"] = [  # own time per send under cProfile (inflated, for ranking)
                f"{v[2] / n * 1e6:.2f} {Path(k[0]).name}:{k[1]}:{k[2]}" for k, v in by_own[:25]
            ]
    print(json.dumps(result))


def _run(tree: Path, system: str, url: str, args: argparse.Namespace, profile: bool = False) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", "--system", system, "--url", url,
            "--topic", f"probe-sync-{uuid.uuid4().hex[:8]}", "--size", str(args.size),
            "--messages", str(args.messages)] + (["--profile"] if profile else []) + (
                ["--phases"] if args.phases else [])
    from bench.bench_clients import child_json

    return child_json(argv, tree, f"{tree} {system}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", default="quire", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--base", type=Path, help="a checkout whose clients/ is the reference")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout --profile runs")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--phases", action="store_true", help="split clients/' sends at the socket calls")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    sys.path.insert(0, str(REPO))
    from bench.bench_clients import start_standalone

    root = Path(tempfile.mkdtemp(prefix="probe-sync-"))
    proc, url = start_standalone(root)
    try:
        if args.profile:
            print(json.dumps(_run(args.tree.resolve(), "quire", url, args, profile=True), indent=1))
            return
        if args.base is None:
            parser.error("--base is required unless --profile")
        variants = {"ours": (REPO, "quire"), "base": (args.base.resolve(), "quire"), "official": (REPO, "official")}
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(args.repeats):
            names = list(variants)
            for name in names[rep % 3:] + names[:rep % 3]:
                tree, system = variants[name]
                r = _run(tree, system, url, args)
                runs[name].append(r)
                print(f"{rep} {name:>8}: p50 {r['p50_us']:6.0f} µs  p99 {r['p99_us']:6.0f}  mean {r['mean_us']:6.0f}  cpu {r['cpu_us_per_send']:6.1f} µs/send  "
                      f"caller {r['caller']}  other {r['other']}"
                      + (f"  phases {r['phases_us']} ({r['phases_of']} sends)" if "phases_us" in r else ""), flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedians of {args.repeats} ({args.size} B, {args.messages} sends; load {os.getloadavg()[0]:.2f})")
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p99_us", "mean_us", "cpu_us_per_send")}
        threads = {t: statistics.median(r[t]["cpu_us"] for r in rs) for t in ("caller", "other")}
        print(f"{name:>8}: p50 {med['p50_us']:.0f} µs  p99 {med['p99_us']:.0f}  mean {med['mean_us']:.0f}  cpu {med['cpu_us_per_send']:.1f} µs/send  "
              f"caller {threads['caller']:.1f}  other {threads['other']:.1f} µs/send", end="")
        if all("phases_us" in r for r in rs):
            print("  phases", {k: statistics.median(r["phases_us"][k] for r in rs) for k in rs[0]["phases_us"]}, end="")
        print()


if __name__ == "__main__":
    main()
