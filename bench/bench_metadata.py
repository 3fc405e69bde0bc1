"""Metadata-store throughput and latency against the raw client library, in the same run.

ZooKeeper (a real server started here): N creates with 200 in flight and N sequential gets
through `metadata.open_store("zk://...")`, against raw kazoo doing the same (all creates
in flight via create_async; blocking gets). Embedded RocksDB: N creates through
`open_store("rocksdb://...")` with 200 in flight, against raw rocksdict writing the same
records with a synced WriteBatch each from 4 threads (our worker-thread limit). Prints ops/s,
p50/p99 and the ratio ours/reference; writes bench/results/bench_metadata.json.

    .venv/bin/python bench/bench_metadata.py [--ops 5000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kazoo.client import KazooClient  # noqa: E402
from rocksdict import Options, Rdict, WriteBatch, WriteOptions  # noqa: E402

from metadata import open_store  # noqa: E402
from metadata.local_tree import NodeRecord  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

CONCURRENCY = 200


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000 if len(samples) > 1 else 0.0


async def ours_creates(url: str, n: int, prefix: str) -> float:
    store = await open_store(url)
    try:
        await store.create(prefix, b"", make_parents=True)
        send, recv = trio.open_memory_channel[int](n)
        for i in range(n):
            send.send_nowait(i)
        send.close()

        async def worker() -> None:
            async for i in recv:
                await store.create(f"{prefix}/n{i:06d}", b"x" * 100)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(CONCURRENCY):
                nursery.start_soon(worker)
        return n / (time.perf_counter() - start)
    finally:
        await store.close()


async def ours_gets(url: str, n: int, path: str) -> list[float]:
    store = await open_store(url)
    try:
        lat = []
        for _ in range(n):
            t = time.perf_counter()
            await store.get(path)
            lat.append(time.perf_counter() - t)
        return lat
    finally:
        await store.close()


def kazoo_creates(hosts: str, n: int, prefix: str) -> float:
    client = KazooClient(hosts=hosts)
    client.start()
    try:
        client.ensure_path(prefix)
        start = time.perf_counter()
        results = [client.create_async(f"{prefix}/n{i:06d}", b"x" * 100) for i in range(n)]
        for r in results:
            r.get()
        return n / (time.perf_counter() - start)
    finally:
        client.stop()
        client.close()


def kazoo_gets(hosts: str, n: int, path: str) -> list[float]:
    client = KazooClient(hosts=hosts)
    client.start()
    try:
        lat = []
        for _ in range(n):
            t = time.perf_counter()
            client.get(path)
            lat.append(time.perf_counter() - t)
        return lat
    finally:
        client.stop()
        client.close()


def rocksdb_reference(path: str, n: int) -> float:
    """Raw rocksdict: the same-size records, one synced WriteBatch per write, 4 threads."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, opts)
    sync = WriteOptions()
    sync.sync = True
    record = NodeRecord(b"x" * 100, 0, 0, 0).to_bytes()
    per_thread = n // 4

    def writer(t: int) -> None:
        for i in range(per_thread):
            batch = WriteBatch(raw_mode=True)
            batch.put(b"N/bench\0n%d-%06d" % (t, i), record)
            batch.put(b"N\0/bench", record)  # the parent's child count, as a create does
            db.write(batch, sync)

    start = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rate = per_thread * 4 / (time.perf_counter() - start)
    db.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=5000)
    args = parser.parse_args()
    n = args.ops
    work = Path(tempfile.mkdtemp(prefix="quire-bench-meta-"))
    results: dict[str, dict[str, float]] = {}
    try:
        with ZooKeeperServer(work / "zk") as zk:
            zk.ensure_path("/bench")
            ref_create = kazoo_creates(zk.connect_string, n, "/bench/ref")
            our_create = trio.run(ours_creates, zk.url("/bench"), n, "/ours")
            ref_lat = kazoo_gets(zk.connect_string, n // 5, "/bench/ref")
            our_lat = trio.run(ours_gets, zk.url("/bench"), n // 5, "/ours")
            results["zk_create"] = {
                "ours_ops_per_s": our_create, "kazoo_ops_per_s": ref_create, "ratio": our_create / ref_create,
            }
            results["zk_get"] = {
                "ours_p50_ms": pct(our_lat, 50), "ours_p99_ms": pct(our_lat, 99),
                "kazoo_p50_ms": pct(ref_lat, 50), "kazoo_p99_ms": pct(ref_lat, 99),
                "ratio_p50": pct(ref_lat, 50) / pct(our_lat, 50),
            }
        ref_rocks = rocksdb_reference(str(work / "raw-rocksdb"), n)
        our_rocks = trio.run(ours_creates, f"rocksdb://{work / 'ours-rocksdb'}", n, "/bench")
        results["rocksdb_create"] = {
            "ours_ops_per_s": our_rocks, "raw_synced_ops_per_s": ref_rocks, "ratio": our_rocks / ref_rocks,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for name, row in results.items():
        print(name, " ".join(f"{k}={v:.2f}" for k, v in row.items()))
    out = REPO / "bench" / "results" / "bench_metadata.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"ops": n, "concurrency": CONCURRENCY, "results": results}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
