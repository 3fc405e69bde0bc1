"""Where a cluster add's CPU goes: the bench_cluster_latency cluster (ZooKeeper, 3 bookies,
1 broker, E=WQ=AQ=2), one-at-a-time 100 B sends, and per process:

* CPU µs per message (utime + stime of all threads from /proc/PID/stat over the sends);
* with ``--strace``: system calls per message of the broker and of each bookie that takes
  adds (``strace -c -f`` attached for the measured sends: strace slows them, so CPU figures
  come from a separate pass without it);
* with ``--idle S``: system calls of each idle process over S seconds (timers that wake five
  processes on two cores add scheduling delay to the tail);
* with ``--pyspy DIR``: ``py-spy record --nonblocking`` (``--native`` with ``--native``) of the
  broker and of one bookie over the sends (collapsed stacks in DIR), and the functions with the
  most samples, own and inclusive.

Run it from the checkout to measure (its code is what the processes load), e.g. paired A/B:

    PYTHONPATH=$PWD .venv/bin/python bench/profile_cluster_add.py --journals tmpfs --strace --idle 10
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_e2e import paced_send_latencies  # noqa: E402
from tests.chaos.topology import ClusterTopology  # noqa: E402

_STRACE_TOTAL = re.compile(r"^\s*100\.00\s+\S+\s+\S+\s+\S+\s+(\d+)\s+(\d+)?\s*total", re.M)


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all threads, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) per thread name of a process (threads of one name summed)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "stat").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
        fields = text.rsplit(")", 1)[1].split()
        name = "main" if task.name == str(pid) else name
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def strace_attach(pids: dict[str, int], out: Path) -> dict[str, subprocess.Popen]:
    """``strace -c -f -p`` on each process, summaries into ``out``/NAME.txt."""
    procs = {}
    for name, pid in pids.items():
        procs[name] = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", str(out / f"{name}.txt")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread before the measured part starts
    return procs


def strace_detach(procs: dict[str, subprocess.Popen], out: Path) -> dict[str, dict[str, int]]:
    """Stop the tracers; per process the call count of each system call (and 'total')."""
    for p in procs.values():
        p.send_signal(2)
    counts = {}
    for name, p in procs.items():
        p.wait(timeout=30)
        text = (out / f"{name}.txt").read_text()
        calls: dict[str, int] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                calls[parts[-1]] = int(parts[3])
        calls["total"] = sum(calls.values())
        counts[name] = calls
    return counts


_IDLE_FRAMES = ("epoll_wait", "PyThread_acquire_lock_timed", "select_poll", "Condition.wait", "_io_epoll.py:243)",
                "selectors.py:468)", "_thread_cache.py:211)")


def print_pyspy(path: Path, name: str, top: int = 20) -> None:
    """The frames with the most samples in a py-spy raw (collapsed) profile: own and inclusive."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        if any(w in stack for w in _IDLE_FRAMES):
            continue  # a thread parked (py-spy --native samples waiting threads too)
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].rstrip(")") for f in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
    total = max(total, 1)
    print(f"--- {name}: {total} busy samples; own / inclusive share of them:")
    for (f, n), (g, m) in zip(sorted(own.items(), key=lambda kv: -kv[1])[:top],
                              sorted(incl.items(), key=lambda kv: -kv[1])[:top]):
        print(f"  {n / total:6.1%} {f[:70]:<70} | {m / total:6.1%} {g[:70]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--journals", choices=("disk", "tmpfs"), default="tmpfs")
    ap.add_argument("--strace", action="store_true", help="system calls per message (a second pass)")
    ap.add_argument("--idle", type=float, default=0.0, help="seconds of idle system-call counting (0: skip)")
    ap.add_argument("--pyspy", metavar="DIR", help="py-spy profiles of the broker and a bookie")
    ap.add_argument("--native", action="store_true",
                    help="py-spy --native (pauses the process per sample: skews where time goes)")
    args = ap.parse_args()

    import pulsar

    base = Path(tempfile.mkdtemp(prefix="prof-cluster-"))
    shm = Path(tempfile.mkdtemp(prefix="prof-cluster-j-", dir="/dev/shm")) if args.journals == "tmpfs" else None
    topo = ClusterTopology.start(base, bookies=3, brokers=1, chaos_settings=False, journal_root=shm)
    print(f"load {os.getloadavg()[0]:.1f} | {args.journals} journals | {REPO}")
    try:
        pids = {name: proc.pid for kind in ("bookie", "broker") for name, proc in topo.targets[kind].items()}
        client = pulsar.Client(topo.service_url)
        producer = client.create_producer(f"persistent://public/default/prof-{time.time_ns()}", batching_enabled=False)
        payload = os.urandom(100)
        for _ in range(200):
            producer.send(payload)
        cpu0 = {n: cpu_split(p) for n, p in pids.items()}
        threads0 = {n: thread_cpu(p) for n, p in pids.items()}
        lat = sorted(paced_send_latencies(producer.send, payload, args.messages, args.rate))
        cpu1 = {n: cpu_split(p) for n, p in pids.items()}
        threads1 = {n: thread_cpu(p) for n, p in pids.items()}
        per_msg = 1e6 / args.messages
        cpu = {n: (sum(cpu1[n]) - sum(cpu0[n])) * per_msg for n in pids}
        sys_cpu = {n: (cpu1[n][1] - cpu0[n][1]) * per_msg for n in pids}
        n = len(lat)
        adders = [k for k, v in cpu.items() if k.startswith("bookie") and v > 20]
        print(f"p50 {lat[n // 2] * 1e6:,.0f} p99 {lat[int(n * 0.99)] * 1e6:,.0f} µs | CPU µs/msg "
              + ", ".join(f"{k} {v:.0f} (sys {sys_cpu[k]:.0f})" for k, v in cpu.items())
              + f" | bookie µs/add {sum(cpu[k] for k in adders) / max(len(adders), 1):.0f}")
        for name in pids:
            if cpu[name] > 20:
                busy = {t: (c - threads0[name].get(t, 0.0)) * per_msg for t, c in threads1[name].items()}
                print(f"  {name} threads, CPU µs/msg: " + ", ".join(
                    f"{t} {c:.0f}" for t, c in sorted(busy.items(), key=lambda kv: -kv[1]) if c >= 1))
        if args.pyspy:
            out = Path(args.pyspy)
            out.mkdir(parents=True, exist_ok=True)
            spies = [subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", *(["--native"] if args.native else ["--nonblocking"]),
                                       "--rate", "1000", "-p", str(pids[name]),
                                       "-o", str(out / f"{name}.txt"), "--format", "raw"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for name in ("broker0", adders[0])]
            time.sleep(1.0)
            paced_send_latencies(producer.send, payload, args.messages, args.rate)
            for s in spies:
                s.send_signal(2)
                s.wait(timeout=60)
            for name in ("broker0", adders[0]):
                print_pyspy(out / f"{name}.txt", name)
            print(f"py-spy collapsed stacks (flamegraph.pl input) in {out}")
        if args.strace:
            out = base / "strace"
            out.mkdir()
            traced = {k: pids[k] for k in ("broker0", *adders)}
            procs = strace_attach(traced, out)
            paced_send_latencies(producer.send, payload, args.messages, args.rate)
            counts = strace_detach(procs, out)
            for name, calls in counts.items():
                top = sorted(((v, k) for k, v in calls.items() if k != "total"), reverse=True)[:8]
                print(f"syscalls/msg {name}: {calls['total'] / args.messages:.2f} ("
                      + ", ".join(f"{k} {v / args.messages:.2f}" for v, k in top) + ")")
        if args.idle:
            out = base / "idle"
            out.mkdir()
            procs = strace_attach(pids, out)
            time.sleep(args.idle)
            counts = strace_detach(procs, out)
            for name, calls in counts.items():
                top = sorted(((v, k) for k, v in calls.items() if k != "total"), reverse=True)[:6]
                print(f"idle syscalls/s {name}: {calls['total'] / args.idle:.1f} ("
                      + ", ".join(f"{k} {v / args.idle:.1f}" for v, k in top) + ")")
        producer.close()
        client.close()
    finally:
        topo.close()
        shutil.rmtree(base, ignore_errors=True)
        if shm is not None:
            shutil.rmtree(shm, ignore_errors=True)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
