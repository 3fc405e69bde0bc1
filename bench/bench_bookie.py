"""Bookie add throughput/latency against the raw disk doing the same job, in the same run.

For 1 KiB and 64 KiB entries in turn, starts a fresh real bookie process (journal fdatasync
on, default group commit settings) and drives it over one connection with 1,000 outstanding
adds: entries/s, MB/s, p50/p99 latency, and the bookie's CPU per entry (user/system, all
threads, from /proc). The reference is the raw disk doing what the journal does:
sequential writes into a file preallocated like the journal (fallocate, 16 MiB chunks) with one fdatasync per group, where the group size
is the average journal group the bookie itself formed (read from its /metrics). Prints the
ratios and writes bench/results/bench_bookie.json.

    .venv/bin/python bench/bench_bookie.py [--seconds 5] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgpack
import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bookie import entry_format, protocol  # noqa: E402
from bookie.protocol import Op, Request  # noqa: E402

MASTER_KEY = b"bench-master-key-000"
unpackb = msgpack.unpackb


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_bookie(root: Path) -> tuple[subprocess.Popen, int, int]:
    port, http = free_port(), free_port()
    cmd = [
        sys.executable, "-m", "quire", "bookie", "--port", str(port), "--http-port", str(http),
        "--journal-dir", str(root / "journal"), "--ledger-dirs", str(root / "ledgers"),
        "--set", "db_storage_write_cache_max_size_mb=256", "--log-level", "WARNING",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise RuntimeError(f"bookie did not start: {line}{proc.stdout.read()}")
    return proc, port, http


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far, all its threads (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def stop_bookie(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def scrape(http: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=5).read().decode()
    out = {}
    for name in ("bookie_journal_group_bytes_sum", "bookie_journal_group_bytes_count", "bookie_journal_group_entries_sum",
                 "bookie_journal_sync_seconds_sum", "bookie_journal_sync_seconds_count",
                 "bookie_checkpoint_entries_total"):
        m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


async def drive(port: int, ledger_id: int, size: int, seconds: float, outstanding: int) -> dict:
    """Pipelined adds for ``seconds``; returns throughput and latency figures."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    payload = os.urandom(size - entry_format.HEADER_SIZE)

    def frame(eid: int) -> bytes:
        body = entry_format.pack_entry(ledger_id, eid, eid - 1, 0, payload)
        return protocol.encode_request(Request(Op.ADD, eid + 1, ledger_id, eid, 0, MASTER_KEY, body))

    # Small entries: build the frames before the clock starts so the load generator, which
    # shares the two cores with the bookie, spends its CPU on sending and receiving only.
    prebuilt = [frame(e) for e in range(int(seconds * 80_000))] if size <= 4096 else None
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    state = {"next": 0, "acked": 0, "errors": 0, "inflight": 0}
    room = trio.Event()
    finished = trio.Event()

    async def sender() -> None:
        nonlocal room
        while time.perf_counter() < deadline and (prebuilt is None or state["next"] < len(prebuilt)):
            n = outstanding - state["inflight"]
            if n <= 0:
                room = trio.Event()
                await room.wait()
                continue
            n = min(n, 256)
            if prebuilt is not None:
                n = min(n, len(prebuilt) - state["next"])
            frames = []
            now = time.perf_counter()
            for _ in range(n):
                eid = state["next"]
                state["next"] += 1
                frames.append(prebuilt[eid] if prebuilt is not None else frame(eid))
                sent_at[eid + 1] = now
            state["inflight"] += n
            await stream.send_all(b"".join(frames))
        while state["inflight"]:
            room = trio.Event()
            await room.wait()
        finished.set()

    async def receiver() -> None:
        decoder = protocol.FrameDecoder()
        while not finished.is_set():
            data = await stream.receive_some(1 << 20)
            if not data:
                raise RuntimeError("bookie closed the connection")
            now = time.perf_counter()
            frames = decoder.feed(data)
            for frame in frames:
                # Only the request id and status matter here: a light decode keeps the load
                # generator's CPU (it shares the machine with the bookie) low.
                hlen = int.from_bytes(frame[:4], "big")
                _, rid, status = unpackb(frame[4 : 4 + hlen])[:3]
                latencies.append(now - sent_at.pop(rid))
                if status != 0:
                    state["errors"] += 1
            state["acked"] += len(frames)
            state["inflight"] -= len(frames)
            room.set()

    t0, cpu0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await sender()
        nursery.cancel_scope.cancel()
    elapsed = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    await stream.aclose()
    latencies.sort()
    n = state["acked"]
    return {
        "entry_bytes": size,
        "entries": n,
        "errors": state["errors"],
        "seconds": elapsed,
        "entries_per_s": n / elapsed,
        "mb_per_s": n * size / elapsed / 1e6,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "client_cpu_us_per_entry": client_cpu / max(n, 1) * 1e6,
    }


def raw_disk(directory: Path, group_bytes: int, total_bytes: int, entry_bytes: int) -> dict:
    """Sequential writes + one fdatasync per group of ``group_bytes`` into a preallocated file."""
    group_bytes = max(group_bytes, entry_bytes)
    groups = max(total_bytes // group_bytes, 50)
    path = directory / "raw.dat"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    chunk = 16 * 1024 * 1024
    prealloc = 0
    buf = os.urandom(group_bytes)
    pos = 0
    t0 = time.perf_counter()
    for _ in range(groups):
        while pos + group_bytes > prealloc:  # same fallocate preallocation as the journal
            os.posix_fallocate(fd, prealloc, chunk)
            prealloc += chunk
        os.pwrite(fd, buf, pos)
        os.fdatasync(fd)
        pos += group_bytes
    elapsed = time.perf_counter() - t0
    os.close(fd)
    os.unlink(path)
    return {
        "group_bytes": group_bytes,
        "groups": groups,
        "mb_per_s": pos / elapsed / 1e6,
        "entries_per_s": pos / entry_bytes / elapsed,
        "fsyncs_per_s": groups / elapsed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--outstanding", type=int, default=1000)
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args()
    results: dict = {"outstanding": args.outstanding, "runs": []}
    for ledger_id, size in ((1, 1024), (2, 64 * 1024)):
        # A fresh bookie per entry size: one run's checkpoints do not land in the next run.
        root = Path(tempfile.mkdtemp(prefix="bench-bookie-", dir=args.dir))
        proc, port, http = start_bookie(root)
        try:
            before = scrape(http)
            cpu0 = cpu_times(proc.pid)
            run = trio.run(drive, port, ledger_id, size, args.seconds, args.outstanding)
            cpu1 = cpu_times(proc.pid)
            n = max(run["entries"], 1)
            run["bookie_cpu_us_per_entry"] = (sum(cpu1) - sum(cpu0)) / n * 1e6
            run["bookie_user_us_per_entry"] = (cpu1[0] - cpu0[0]) / n * 1e6
            run["bookie_sys_us_per_entry"] = (cpu1[1] - cpu0[1]) / n * 1e6
            after = scrape(http)
        finally:
            stop_bookie(proc)
            shutil.rmtree(root, ignore_errors=True)
        groups = after["bookie_journal_group_bytes_count"] - before["bookie_journal_group_bytes_count"]
        gbytes = after["bookie_journal_group_bytes_sum"] - before["bookie_journal_group_bytes_sum"]
        run["journal_groups"] = int(groups)
        run["avg_group_bytes"] = gbytes / groups if groups else 0
        run["avg_group_entries"] = run["entries"] / groups if groups else 0
        syncs = after["bookie_journal_sync_seconds_count"] - before["bookie_journal_sync_seconds_count"]
        sync_s = after["bookie_journal_sync_seconds_sum"] - before["bookie_journal_sync_seconds_sum"]
        run["avg_sync_ms"] = sync_s / syncs * 1000 if syncs else 0
        # Everything the bookie wrote: the journal, plus the entry logs of its checkpoints.
        flushed = after["bookie_checkpoint_entries_total"] - before["bookie_checkpoint_entries_total"]
        run["disk_write_mb_per_s"] = (gbytes + flushed * (size + 24)) / run["seconds"] / 1e6
        raw_dir = Path(tempfile.mkdtemp(prefix="bench-raw-", dir=args.dir))
        try:
            raw = raw_disk(raw_dir, int(run["avg_group_bytes"]), min(int(run["entries"] * size), 512 * 1024 * 1024), size)
        finally:
            shutil.rmtree(raw_dir, ignore_errors=True)
        run["raw_disk"] = raw
        run["ratio_mb_vs_raw"] = run["mb_per_s"] / raw["mb_per_s"]
        results["runs"].append(run)
        print(
            f"{size // 1024:>3} KiB: {run['entries_per_s']:>9,.0f} entries/s {run['mb_per_s']:>7.1f} MB/s "
            f"p50 {run['p50_ms']:.2f} ms p99 {run['p99_ms']:.2f} ms | group {run['avg_group_entries']:.0f} entries "
            f"({run['avg_group_bytes'] / 1024:.0f} KiB), sync {run['avg_sync_ms']:.2f} ms | raw disk same groups "
            f"{raw['mb_per_s']:.1f} MB/s -> ratio {run['ratio_mb_vs_raw']:.2f} (bookie wrote "
            f"{run['disk_write_mb_per_s']:.0f} MB/s journal + entry logs) | cpu/entry bookie "
            f"{run['bookie_cpu_us_per_entry']:.1f} us (user {run['bookie_user_us_per_entry']:.1f}, "
            f"sys {run['bookie_sys_us_per_entry']:.1f}), client {run['client_cpu_us_per_entry']:.1f} us",
            flush=True,
        )
    out = REPO / "bench" / "results" / "bench_bookie.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
