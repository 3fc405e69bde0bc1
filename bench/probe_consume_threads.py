"""Where a blocking consumer's CPU goes, per thread, paired with a base checkout.

One ``quire standalone`` (this checkout). Each round the official client fills a topic
(``bench/peers/workloads.py produce``, batching on) and then ``base`` and ``ours`` (alternating
which goes first) each consume it in a fresh process, ``receive`` + ``acknowledge`` per message
as the peers consume workload: the consuming thread's CPU (``time.thread_time``) and the client
loop thread's (the same clock read on that thread, through ``_LoopThread.run_sync``), per
message; also each thread's voluntary context switches per 1,000 messages (hand-offs: an empty
queue, the GIL) and the garbage collections during the run (per generation, wall time per
message). ``--profile`` adds each thread's cProfile (the loop thread's enabled on that thread):
the top functions by own time and calls per message.

    .venv/bin/python bench/probe_consume_threads.py --base /work/wt/base --size 1024 --messages 50000 --repeats 3
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
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _switches(tid: int) -> int:
    """Voluntary context switches of thread ``tid`` so far (each a sleep: a GIL or queue hand-off)."""
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def child(url: str, topic: str, messages: int, profile: bool) -> dict[str, Any]:
    """Runs in the variant's tree (``clients`` from its PYTHONPATH)."""
    import gc
    import threading

    import clients

    c = clients.Client(url)
    loop = c._loop
    cons = c.subscribe(topic, "probe", initial_position=clients.InitialPosition.Earliest, receiver_queue_size=1000)
    receive, ack = cons.receive, cons.acknowledge
    ack(receive(30_000))  # the first message starts the clock (after subscribe + first fetch)
    profs: list[Any] = []
    if profile:
        import cProfile

        profs = [cProfile.Profile(), cProfile.Profile()]
        loop.run_sync(profs[1].enable)
        profs[0].enable()
    main_tid, loop_tid = threading.get_native_id(), loop.run_sync(threading.get_native_id)
    gc_runs, gc_s, gc_t0 = [0, 0, 0], [0.0, 0.0, 0.0], [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:  # collections by generation, and their time
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_runs[info["generation"]] += 1
            gc_s[info["generation"]] += time.perf_counter() - gc_t0[0]

    gc.callbacks.append(on_gc)
    sw0 = _switches(main_tid), _switches(loop_tid)
    loop0, main0 = loop.run_sync(time.thread_time), time.thread_time()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(messages - 1):
        ack(receive(30_000))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    main1, loop1 = time.thread_time(), loop.run_sync(time.thread_time)
    sw1 = _switches(main_tid), _switches(loop_tid)
    gc.callbacks.remove(on_gc)
    if profile:
        profs[0].disable()
        loop.run_sync(profs[1].disable)
    cons.close()
    c.close()
    n = messages - 1
    out: dict[str, Any] = {
        "msg_per_s": round(n / elapsed),
        "cpu_us": round(cpu / n * 1e6, 3),
        "consumer_thread_us": round((main1 - main0) / n * 1e6, 3),
        "loop_thread_us": round((loop1 - loop0) / n * 1e6, 3),
        # voluntary context switches per 1,000 messages, consumer and loop thread
        "consumer_switches_per_1k": round((sw1[0] - sw0[0]) / n * 1000, 2),
        "loop_switches_per_1k": round((sw1[1] - sw0[1]) / n * 1000, 2),
        # garbage collections (generations 0, 1, 2) during the run, and their wall time per message
        "gc_runs": gc_runs,
        "gc_us": round(sum(gc_s) / n * 1e6, 3),
        "gc2_ms": round(gc_s[2] * 1e3, 1),
    }
    if profile:
        import pstats

        for name, prof in zip(("consumer", "loop"), profs):
            stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
            top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
            out[f"{name}_top"] = [
                f"{func[2]} ({Path(func[0]).name}:{func[1]}): {tt / n * 1e6:.3f} us, {nc / n:.3f} calls/msg"
                for func, (cc, nc, tt, ct, callers) in top
            ]
    return out


def run_child(tree: Path, url: str, topic: str, messages: int, profile: bool) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", url, topic, str(messages)]
    if profile:
        argv.append("--profile")
    from bench.bench_clients import child_json

    return child_json(argv, tree, str(tree))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]), "--profile" in sys.argv)))
        return
    sys.path.insert(0, str(REPO))
    from bench.ab_clients import worker
    from bench.bench_clients import start_standalone

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    variants = {"base": args.base.resolve(), "ours": REPO}
    root = Path(tempfile.mkdtemp(prefix="probe-consume-"))
    proc, url = start_standalone(root)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    try:
        for rep in range(args.repeats):
            order = list(variants) if rep % 2 == 0 else list(reversed(variants))
            for name in order:
                topic = f"probe-{name}-{uuid.uuid4().hex[:8]}"
                worker(REPO, "quire-official", "produce", url, topic, args.size, args.messages)
                r = run_child(variants[name], url, topic, args.messages, args.profile)
                runs[name].append(r)
                print(f"{rep} {name:>5}: {r['msg_per_s']:>9,} msg/s  cpu {r['cpu_us']:.2f} us/msg = consumer "
                      f"{r['consumer_thread_us']:.2f} + loop {r['loop_thread_us']:.2f}  switches/1k "
                      f"{r['consumer_switches_per_1k']:.1f} + {r['loop_switches_per_1k']:.1f}  gc {r['gc_runs']} "
                      f"{r['gc_us']:.2f} us/msg  (load {os.getloadavg()[0]:.1f})",
                      flush=True)
                for key in ("consumer_top", "loop_top"):
                    for line in r.get(key, []):
                        print(f"    {key[:-4]}: {line}")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedians of {args.repeats} ({args.size} B, {args.messages} messages)")
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("msg_per_s", "cpu_us", "consumer_thread_us", "loop_thread_us",
                                                                "consumer_switches_per_1k", "loop_switches_per_1k")}
        print(f"{name:>5}: {med['msg_per_s']:>9,.0f} msg/s  cpu {med['cpu_us']:.2f} us/msg = consumer "
              f"{med['consumer_thread_us']:.2f} + loop {med['loop_thread_us']:.2f}  switches/1k "
              f"{med['consumer_switches_per_1k']:.1f} + {med['loop_switches_per_1k']:.1f}")


if __name__ == "__main__":
    main()
