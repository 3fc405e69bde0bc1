"""Retention gives the disk back: bookie GC + compaction end to end against `quire standalone`.

Two namespaces, ``public/gone`` (retention 0/0, consumed) and ``public/kept`` (retention
-1/-1), are written interleaved with the official client, so every entry log holds both.
The consumed topic is trimmed by retention, both namespaces are unloaded, then one forced
GC (``PUT /api/v1/bookie/gc`` with major compaction) runs. Reported:

* entry-log bytes on disk after GC / live bytes (every record the location index still
  points at, read from the stopped bookie's index) and the seconds GC took (goal <= 1.3);
* compaction MB/s (old log bytes processed / time compacting, from the bookie's metrics)
  against a plain sequential copy (read + write + fsync) of the same log files in the same
  run (goal >= 0.5);
* produce MB/s while a major compaction runs against produce MB/s without it (goal >= 0.8),
  with compaction unthrottled, then throttled by bytes (``--throttled-rate-mb``, 20).

Scaled down by default (~64 MB written); ``--full`` writes ~1 GB. Writes
bench/results/bench_gc.json.

    .venv/bin/python bench/bench_gc.py [--full] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import httpx
import pulsar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bookie import entry_log_format as elf  # noqa: E402
from bookie.entry_logger import list_log_ids  # noqa: E402
from bookie.ledger_index import EntryLocationIndex  # noqa: E402

MB = 1024 * 1024


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standalone(root: Path, log_size: int, rate_bytes: int = 0) -> tuple[subprocess.Popen, int, int, int]:
    port, web, bk = free_port(), free_port(), free_port()
    conf = root / "quire.toml"
    conf.write_text(
        "managed_ledger_max_entries_per_ledger = 50\n"  # batches of ~32 messages: ~6 MB ledgers

        "retention_check_interval_in_seconds = 1\n"
        "[bookie]\n"
        f"log_size_limit = {log_size}\n"
        "compaction_rate_by_entries = 0\n"
        f"is_throttle_by_bytes = {'true' if rate_bytes > 0 else 'false'}\n"
        f"compaction_rate_by_bytes = {rate_bytes}\n"
        "gc_wait_time_ms = 3600000\n"
        "db_storage_write_cache_max_size_mb = 64\n"
    )
    cmd = [sys.executable, "-m", "quire", "standalone", "--data-dir", str(root / "data"), "--port", str(port),
           "--web-port", str(web), "--bookie-port", "0", "--bookie-http-port", str(bk), "--conf", str(conf),
           "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(root / "standalone.log", "w"))
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=1)
            return proc, port, web, bk
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("standalone did not start: " + (root / "standalone.log").read_text()[-2000:])


def log_files(cur: Path) -> list[Path]:
    return [cur / elf.file_name(i) for i in list_log_ids(cur)]


def disk_bytes(cur: Path) -> int:
    return sum(p.stat().st_size for p in log_files(cur) if p.exists())


def metric(bk: httpx.Client, name: str) -> float:
    for line in bk.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def produce(producer: pulsar.Producer, payload: bytes, seconds: float | None = None, count: int | None = None,
            stop: threading.Event | None = None) -> tuple[int, float]:
    """Send until count / seconds / stop; returns (messages, elapsed)."""
    n = 0
    t0 = time.monotonic()
    while True:
        if count is not None and n >= count:
            break
        if seconds is not None and time.monotonic() - t0 >= seconds:
            break
        if stop is not None and stop.is_set():
            break
        producer.send_async(payload, None)
        n += 1
    producer.flush()
    return n, time.monotonic() - t0


def sequential_copy(files: list[Path], scratch: Path) -> tuple[int, float]:
    """Read + write + fsync every file, 4 MiB at a time (what compaction does, minus its work)."""
    scratch.mkdir(parents=True, exist_ok=True)
    total = 0
    t0 = time.monotonic()
    for i, src in enumerate(files):
        dst = scratch / f"{i}.copy"
        with open(src, "rb") as f, open(dst, "wb") as g:
            while chunk := f.read(4 * MB):
                g.write(chunk)
                total += len(chunk)
            g.flush()
            os.fsync(g.fileno())
    elapsed = time.monotonic() - t0
    shutil.rmtree(scratch)
    return total, elapsed


def index_live_bytes(cur: Path) -> int:
    """Bytes of every record the (stopped) bookie's location index points at."""
    index = EntryLocationIndex(cur / "locations")
    try:
        return sum(index.bytes_by_log().values())
    finally:
        index.close()


class Node:
    """A standalone with the two namespaces, written interleaved, one consumed and trimmed."""

    def __init__(self, root: Path, total: int, size: int, log_size: int, rate_bytes: int = 0) -> None:
        self.root = root
        self.proc, port, web, bk_port = start_standalone(root, log_size, rate_bytes)
        self.cur = root / "data" / "bookkeeper" / "ledgers" / "current"
        self.admin = httpx.Client(base_url=f"http://127.0.0.1:{web}", timeout=60)
        self.bk = httpx.Client(base_url=f"http://127.0.0.1:{bk_port}", timeout=60)
        self.client = pulsar.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=60)
        self.opts = dict(batching_enabled=True, batching_max_publish_delay_ms=5, block_if_queue_full=True,
                         max_pending_messages=5000)
        self.payload = os.urandom(size)
        self.size = size
        self.per_topic = total // 2 // size

    def write_and_retain(self) -> None:
        admin = self.admin
        admin.put("/admin/v2/namespaces/public/gone")
        admin.put("/admin/v2/namespaces/public/kept")
        admin.post("/admin/v2/namespaces/public/kept/retention", json={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
        gone_t, kept_t = "persistent://public/gone/t", "persistent://public/kept/t"
        consumer = self.client.subscribe(gone_t, "s", receiver_queue_size=5000)
        p_gone = self.client.create_producer(gone_t, **self.opts)
        p_kept = self.client.create_producer(kept_t, **self.opts)
        for _ in range(self.per_topic):  # interleaved: every entry log holds both
            p_gone.send_async(self.payload, None)
            p_kept.send_async(self.payload, None)
        p_gone.flush()
        p_kept.flush()
        for _ in range(self.per_topic):
            consumer.acknowledge(consumer.receive(timeout_millis=30000))
        consumer.close()
        p_gone.close()
        p_kept.close()
        deadline = time.monotonic() + 120
        while len(admin.get("/admin/v2/persistent/public/gone/t/internalStats").json()["ledgers"]) > 1:
            if time.monotonic() > deadline:
                raise RuntimeError("retention did not trim the consumed topic")
            time.sleep(0.5)
        for ns in ("public/gone", "public/kept"):
            admin.put(f"/admin/v2/namespaces/{ns}/unload")
        time.sleep(11)  # flush_interval_ms: the write cache reaches the entry logs, GC can see them

    def gc(self) -> float:
        t0 = time.monotonic()
        self.bk.put("/api/v1/bookie/gc", json={"forceMajor": True})
        while self.bk.get("/api/v1/bookie/gc").json()["is_in_force_gc"] == "true":
            time.sleep(0.05)
        return time.monotonic() - t0

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="about 1 GB instead of about 64 MB")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--size", type=int, default=4096, help="message payload bytes")
    ap.add_argument("--throttled-rate-mb", type=int, default=20, help="compaction_rate_by_bytes (MB/s) of the throttled run")
    args = ap.parse_args()
    total = (1024 if args.full else 64) * MB
    log_size = (128 if args.full else 8) * MB
    result: dict = {"written_bytes": total, "payload": args.size, "log_size_limit": log_size}

    # 1. the retention scenario, GC alone: disk/live, time, compaction speed vs a plain copy
    root = Path(tempfile.mkdtemp(prefix="bench-gc-", dir=args.dir))
    node = Node(root, total, args.size, log_size)
    try:
        node.write_and_retain()
        before = disk_bytes(node.cur)
        copy_bytes, copy_s = sequential_copy(log_files(node.cur), root / "scratch")
        gc_s = node.gc()
        bk = node.bk
        read = metric(bk, "bookie_gc_compaction_read_bytes_total")
        secs = metric(bk, "bookie_gc_compaction_seconds_total")
        result.update(
            entry_log_bytes_before_gc=before,
            gc_seconds=round(gc_s, 2),
            sequential_copy_MBps=round(copy_bytes / MB / copy_s, 1),
            compaction_read_bytes=int(read),
            compaction_written_bytes=int(metric(bk, "bookie_gc_compaction_written_bytes_total")),
            compaction_MBps=round(read / MB / secs, 1) if secs else None,
            deleted_ledgers=int(metric(bk, "bookie_gc_deleted_ledgers_total")),
            deleted_entry_logs=int(metric(bk, "bookie_gc_deleted_entry_logs_total")),
        )
    finally:
        node.stop()
    after = disk_bytes(node.cur)
    live = index_live_bytes(node.cur)
    result.update(entry_log_bytes_after_gc=after, live_bytes=live, disk_over_live=round(after / live, 3))
    if result["compaction_MBps"]:
        result["compaction_vs_copy"] = round(result["compaction_MBps"] / result["sequential_copy_MBps"], 3)
    shutil.rmtree(root, ignore_errors=True)

    # 2. produce throughput with and without a major compaction running (same process),
    #    compaction unthrottled, then throttled by bytes
    for label, rate in (("", 0), ("_throttled", args.throttled_rate_mb * MB)):
        root = Path(tempfile.mkdtemp(prefix="bench-gc-", dir=args.dir))
        node = Node(root, total, args.size, log_size, rate)
        try:
            node.write_and_retain()
            producer = node.client.create_producer("persistent://public/gone/ref", **node.opts)  # no subscription
            produce(producer, node.payload, seconds=2.0)  # warm up: the write cache reaches its steady state
            stop = threading.Event()
            box: list[tuple[int, float]] = []
            th = threading.Thread(target=lambda: box.append(produce(producer, node.payload, stop=stop)))
            th.start()
            time.sleep(0.3)
            gc_s = node.gc()
            stop.set()
            th.join()
            n, s = box[0]
            during = n * args.size / MB / s
            # the reference: the same producer, as long again, without compaction
            n, s = produce(producer, node.payload, seconds=max(s, 3.0))
            alone = n * args.size / MB / s
            result[f"produce_MBps_alone{label}"] = round(alone, 1)
            result[f"produce_MBps_during_gc{label}"] = round(during, 1)
            result[f"gc_seconds_while_producing{label}"] = round(gc_s, 2)
            result[f"produce_during_gc_vs_alone{label}"] = round(during / alone, 3)
        finally:
            node.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["throttled_compaction_rate_MBps"] = args.throttled_rate_mb
    result["goals"] = {"disk_over_live": "<= 1.3", "compaction_vs_copy": ">= 0.5", "produce_during_gc_vs_alone": ">= 0.8"}
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / ("bench_gc_full.json" if args.full else "bench_gc.json")
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
