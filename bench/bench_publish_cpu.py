"""Server CPU per unbatched message on the standalone publish path, A/B between checkouts.

Starts ``quire standalone`` from each given checkout (``--repo``, default this one) with its
data dir on tmpfs (/dev/shm) or on disk, and sends N one-at-a-time messages (send, wait for
the receipt, next) with the official client and with ``clients/``. The figure is the CPU time
of the standalone process (utime + stime of all its threads, /proc/PID/stat) over the N sends,
divided by N: CPU time is robust to a shared machine, wall time is not. Checkouts run in
interleaved rounds (A B A B ...) so both see the same load; per-round figures and their
medians are printed and written as JSON. Latency p50/p99 of the same sends are recorded too
(wall time: only comparable within a round), and the standalone's context switches per
message: sleeps (voluntary: epoll_wait, a durable write's I/O waits) and preemptions.

Next to them (unless ``--no-floor``) runs the floor (``bench/publish_floor.py``): a bare trio
server that answers the same clients' SENDs with the same system calls (wait readable, read,
one ``pwritev2(RWF_DSYNC)`` to a journal file in the same place, a 22-byte receipt) and no
broker or bookie work. Its row is ``floor/<client>``; the JSON's ``floor_us_per_msg`` holds its
median per client and every checkout's row its ``ours_over_floor`` (per round, then median).
``--floor-read-first`` adds the floor of a server that reads again at once after each receipt
and waits only when nothing is there (row ``floor_read_first/<client>``, JSON
``floor_read_first_us_per_msg``).

    .venv/bin/python bench/bench_publish_cpu.py [--repo DIR ...] [--messages 20000] [--rounds 3] [--disk]
        [--paired 1000]  # all checkouts' standalones at once, blocks of 1000 sends alternating
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import bench_e2e  # noqa: E402


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all threads) from /proc, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def context_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of a process, summed over its threads: a
    voluntary one is a sleep (epoll_wait, a durable write's I/O wait), an involuntary one a
    preemption (on this 2-core machine mostly by the client the receipt just woke)."""
    vol = invol = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        vol += int(status.split("\nvoluntary_ctxt_switches:", 1)[1].split(None, 1)[0])
        invol += int(status.split("\nnonvoluntary_ctxt_switches:", 1)[1].split(None, 1)[0])
    return vol, invol


FLOOR = "floor"  # the floor's name in the rows (bench/publish_floor.py)
FLOOR_REPO = Path(FLOOR)  # its place in the list of checkouts (theirs are absolute paths)
FLOOR_READ_FIRST = "floor_read_first"
FLOOR_READ_FIRST_REPO = Path(FLOOR_READ_FIRST)


def start_standalone(repo: Path, root: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    if repo in (FLOOR_REPO, FLOOR_READ_FIRST_REPO):
        return start_floor(root, read_first=repo == FLOOR_READ_FIRST_REPO)
    return bench_e2e.start_standalone(root, repo, env or {})


def start_floor(root: Path, read_first: bool = False) -> tuple[subprocess.Popen, int]:
    """The floor server (bench/publish_floor.py) with its journal file under ``root``."""
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "publish_floor.py"), str(root)]
                            + (["--read-first"] if read_first else []), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise RuntimeError(f"the floor server did not start (exit {proc.returncode})")
    return proc, int(line)


def add_floor_ratios(rows: dict[str, list[dict]]) -> None:
    """Each checkout's row of a round gets ``ours_over_floor``: its CPU per message over the
    floor's with the same client in the same round."""
    for key, rs in rows.items():
        name, kind = key.rsplit("/", 1)
        floor = rows.get(f"{FLOOR}/{kind}")
        if name in (FLOOR, FLOOR_READ_FIRST) or floor is None:
            continue
        for r, f in zip(rs, floor):
            if f["server_cpu_us_per_msg"] > 0:
                r["ours_over_floor"] = r["server_cpu_us_per_msg"] / f["server_cpu_us_per_msg"]


def one_at_a_time(send: Callable[[bytes], Any], payload: bytes, n: int, pid: int,
                  lat: list[float]) -> tuple[float, float, int, int]:
    """``n`` sends, each after the previous one's receipt; their latencies are appended to
    ``lat``; returns the standalone's (user, system) CPU seconds and its (voluntary,
    involuntary) context switches over them."""
    cs0 = context_switches(pid)
    cpu0 = cpu_seconds(pid)
    for _ in range(n):
        t0 = time.perf_counter()
        send(payload)
        lat.append(time.perf_counter() - t0)
    cpu1 = cpu_seconds(pid)
    cs1 = context_switches(pid)
    return cpu1[0] - cpu0[0], cpu1[1] - cpu0[1], cs1[0] - cs0[0], cs1[1] - cs0[1]


def summarize(n: int, user: float, system: float, vol: int, invol: int, lat: list[float]) -> dict:
    lat.sort()
    return {"server_cpu_us_per_msg": (user + system) / n * 1e6, "server_user_us_per_msg": user / n * 1e6,
            "server_system_us_per_msg": system / n * 1e6, "server_sleeps_per_msg": vol / n,
            "server_preemptions_per_msg": invol / n, "p50_us": lat[n // 2] * 1e6, "p99_us": lat[int(n * 0.99)] * 1e6}


def describe(r: dict) -> str:
    return (f"server CPU {r['server_cpu_us_per_msg']:.1f} us/msg (user {r['server_user_us_per_msg']:.1f} "
            f"system {r['server_system_us_per_msg']:.1f}), {r['server_sleeps_per_msg']:.2f} sleeps "
            f"{r['server_preemptions_per_msg']:.2f} preemptions/msg, p50 {r['p50_us']:.0f} us p99 {r['p99_us']:.0f} us")


def run_client(kind: str, port: int, pid: int, n: int, size: int) -> dict:
    lib = client_lib(kind)
    client = lib.Client(f"pulsar://127.0.0.1:{port}")
    try:
        producer = client.create_producer(f"persistent://public/default/cpu-{kind}-{time.time_ns()}",
                                          batching_enabled=False)
        payload = os.urandom(size)
        for _ in range(200):
            producer.send(payload)  # warm-up: topic loaded, ledger open
        lat: list[float] = []
        result = summarize(n, *one_at_a_time(producer.send, payload, n, pid, lat), lat)
        producer.close()
        return result
    finally:
        client.close()


def client_lib(kind: str) -> Any:
    if kind == "official":
        import pulsar

        return pulsar
    sys.path.insert(0, str(REPO))
    import clients

    return clients


def paired_round(repos: list[Path], kinds: list[str], n: int, size: int, block: int, base: str | None) -> dict[str, dict]:
    """Every checkout's standalone runs at once; blocks of ``block`` sends alternate between
    them (A B A B ...), so each sees the same load; a checkout's CPU counts over its blocks only."""
    procs, roots = [], []
    try:
        for repo in repos:
            roots.append(Path(tempfile.mkdtemp(prefix="bench-cpu-", dir=base)))
            procs.append(start_standalone(repo, roots[-1]))
        out: dict[str, dict] = {}
        for kind in kinds:
            lib = client_lib(kind)
            payload = os.urandom(size)
            conns = []
            for (proc, port) in procs:
                client = lib.Client(f"pulsar://127.0.0.1:{port}")
                producer = client.create_producer(f"persistent://public/default/cpu-{kind}-{time.time_ns()}",
                                                  batching_enabled=False)
                for _ in range(200):
                    producer.send(payload)  # warm-up: topic loaded, ledger open
                conns.append((client, producer))
            totals = [[0.0, 0.0, 0, 0] for _ in repos]  # user, system, sleeps, preemptions
            lats: list[list[float]] = [[] for _ in repos]
            for start in range(0, n, block):
                for i, (proc, _port) in enumerate(procs):
                    r = one_at_a_time(conns[i][1].send, payload, min(block, n - start), proc.pid, lats[i])
                    totals[i] = [t + v for t, v in zip(totals[i], r)]
            for i, repo in enumerate(repos):
                user, system, vol, invol = totals[i]
                out[f"{repo.name}/{kind}"] = summarize(n, user, system, int(vol), int(invol), lats[i])
            for client, producer in conns:
                producer.close()
                client.close()
        return out
    finally:
        for proc, _port in procs:
            proc.terminate()
            proc.wait(30)
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", help="checkout to run the standalone from (repeat for A/B)")
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default="official,quire")
    ap.add_argument("--disk", action="store_true", help="data dir on disk (default: tmpfs /dev/shm)")
    ap.add_argument("--no-floor", action="store_true",
                    help="without the floor server (bench/publish_floor.py) next to the standalones")
    ap.add_argument("--floor-read-first", action="store_true",
                    help="also the floor of a server that reads first (publish_floor.py --read-first)")
    ap.add_argument("--paired", type=int, metavar="BLOCK",
                    help="run every checkout's standalone at once, alternating blocks of BLOCK sends")
    ap.add_argument("--cprofile", help="write a cProfile (CPU clock) of each standalone's event loop to DIR/")
    ap.add_argument("--py-spy", help="sample each standalone with py-spy (raw flame format) into DIR/")
    ap.add_argument("--perf", help="perf record -g each standalone (CPU samples, kernel too) into DIR/")
    ap.add_argument("--strace", help="count each standalone's system calls (strace -c -f) into DIR/")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_publish_cpu.json"))
    args = ap.parse_args()
    repos = [Path(r).absolute() for r in (args.repo or [str(REPO)])]  # (a link keeps its own name)
    if not args.no_floor:
        repos.append(FLOOR_REPO)  # (start_standalone starts the floor for it)
    if args.floor_read_first:
        repos.append(FLOOR_READ_FIRST_REPO)
    kinds = args.clients.split(",")
    base = None if args.disk else "/dev/shm"
    rows: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        if args.paired:
            for key, r in paired_round(repos, kinds, args.messages, args.size, args.paired, base).items():
                rows.setdefault(key, []).append(r)
                print(f"round {rnd} {key}: {describe(r)}", flush=True)
            continue
        for repo in repos:
            root = Path(tempfile.mkdtemp(prefix="bench-cpu-", dir=base))
            env = None
            if args.cprofile:
                Path(args.cprofile).mkdir(parents=True, exist_ok=True)
                env = {"QUIRE_CPROFILE": str(Path(args.cprofile).resolve() / f"{repo.name}-{rnd}.pstats"),
                       "QUIRE_CPROFILE_CLOCK": "cpu"}
            proc, port = start_standalone(repo, root, env)
            tracer = None
            if args.py_spy or args.strace or args.perf:
                out_dir = Path(args.py_spy or args.strace or args.perf)
                out_dir.mkdir(parents=True, exist_ok=True)
                cmd = ["perf", "record", "-g", "-F", "2000", "-p", str(proc.pid), "-o",
                       str(out_dir / f"{repo.name}-{rnd}.data")] if args.perf else ([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(proc.pid), "-f", "raw", "-r", "1000",
                        "-o", str(out_dir / f"{repo.name}-{rnd}.txt")] if args.py_spy else
                       ["strace", "-c", "-f", "-p", str(proc.pid), "-o", str(out_dir / f"{repo.name}-{rnd}.txt")])
                tracer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)  # attached before the sends start
            try:
                for kind in kinds:
                    r = run_client(kind, port, proc.pid, args.messages, args.size)
                    key = f"{repo.name}/{kind}"
                    rows.setdefault(key, []).append(r)
                    print(f"round {rnd} {key}: {describe(r)}", flush=True)
            finally:
                if tracer is not None:
                    tracer.send_signal(signal.SIGINT)
                    tracer.wait(60)
                proc.terminate()
                proc.wait(30)
                shutil.rmtree(root, ignore_errors=True)
    add_floor_ratios(rows)
    summary = {key: {f: statistics.median(r[f] for r in rs if f in r) for f in rs[0]} for key, rs in rows.items()}
    floor, floor_read_first = ({key.rsplit("/", 1)[1]: s["server_cpu_us_per_msg"] for key, s in summary.items()
                                if key.startswith(name + "/")} for name in (FLOOR, FLOOR_READ_FIRST))
    for key, s in summary.items():
        ratio = f", ours/floor {s['ours_over_floor']:.2f}" if "ours_over_floor" in s else ""
        print(f"median {key}: {describe(s)}{ratio}")
    Path(args.out).write_text(json.dumps({"messages": args.messages, "size": args.size, "disk": args.disk,
                                          "load": os.getloadavg(), "floor_us_per_msg": floor,
                                          **({"floor_read_first_us_per_msg": floor_read_first} if floor_read_first else {}),
                                          "rounds": rows,
                                          "median": summary}, indent=1))


if __name__ == "__main__":
    main()
