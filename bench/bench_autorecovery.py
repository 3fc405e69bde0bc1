"""Auto-recovery throughput: MB/s re-replicated against a plain file copy of the same bytes.

Each round starts a real ZooKeeper and 3 real bookie processes (journal fdatasync on), writes
``--mb`` MB into ledgers with E=WQ=AQ=2 (``--entry-size`` bytes per entry, ``--ledgers``
ledgers, closed), SIGKILLs the bookie holding the most data and waits until its registration
is gone. Then, in this process (a `quire autorecovery` on the same code path):

* **autorecovery**: the auditor's audit marks the ledgers, then a replication worker's pass
  copies every fragment the dead bookie held from the survivor to the third bookie (range reads,
  RECOVERY_ADD adds acked after the target's journal fsync) and CASes the ensembles. Timed from
  the start of the worker's pass to the last mark removed; bytes = entry bytes copied.
* **file copy** (the reference): the same number of bytes copied between the two survivors'
  disks (the dead bookie's journal and entry-log files, read and written into the third
  bookie's data dir, one fsync per file at the end), timed before and after the recovery.

Prints MB/s for both and the ratio; writes ``bench/results/bench_autorecovery.json``.

    .venv/bin/python bench/bench_autorecovery.py [--mb 32] [--entry-size 16384] [--ledgers 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import metadata  # noqa: E402
from bookie.autorecovery.auditor import Auditor  # noqa: E402
from bookie.autorecovery.metrics import AutoRecoveryMetrics  # noqa: E402
from bookie.autorecovery.replication_worker import ReplicationWorker  # noqa: E402
from bookie.autorecovery.underreplication import UnderReplicationManager  # noqa: E402
from bookie.client import BookKeeper, ClientConfig  # noqa: E402
from bookie.config import BookieConfig  # noqa: E402
from bench import bench_ledger_client  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

MB = 1024 * 1024


def start_bookie(root: Path, zk_url: str, i: int) -> tuple[subprocess.Popen, str, list[Path]]:
    proc, bookie_id = bench_ledger_client.start_bookie(
        root, zk_url, i, ("--set", "zk_timeout=2000", "--set", "journal_pre_alloc_size_mb=4"))
    return proc, bookie_id, [root / f"j{i}", root / f"l{i}"]


def file_copy(src_dirs: list[Path], dst_dir: Path, nbytes: int) -> float:
    """Copy the first ``nbytes`` of the files under ``src_dirs`` into ``dst_dir`` (fsync per file);
    returns MB/s."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    files = sorted((p for d in src_dirs for p in d.rglob("*") if p.is_file() and p.stat().st_size > 0),
                   key=lambda p: -p.stat().st_size)
    left = nbytes
    t0 = time.perf_counter()
    for i, src in enumerate(files):
        if left <= 0:
            break
        with open(src, "rb") as fin, open(dst_dir / f"{i}-{src.name}", "wb") as fout:
            while left > 0:
                chunk = fin.read(min(1 * MB, left))
                if not chunk:
                    break
                fout.write(chunk)
                left -= len(chunk)
            fout.flush()
            os.fsync(fout.fileno())
    elapsed = time.perf_counter() - t0
    copied = nbytes - left
    shutil.rmtree(dst_dir, ignore_errors=True)
    return copied / MB / elapsed


async def one_round(root: Path, zk: ZooKeeperServer, args: argparse.Namespace, index: int) -> dict:
    chroot = f"/bench-ar-{index}"
    zk.ensure_path(chroot)
    url = zk.url(chroot)
    root.mkdir(parents=True, exist_ok=True)
    bookies = [start_bookie(root, url, i) for i in range(3)]
    try:
        store = await metadata.open_store(url)
        try:
            return await _measure(store, bookies, root, args)
        finally:
            await store.close()
    finally:
        for proc, _, _ in bookies:
            proc.kill()
            proc.wait()


async def _measure(store, bookies, root: Path, args: argparse.Namespace) -> dict:
    ids = {b for _, b, _ in bookies}
    with trio.fail_after(60):
        while not ids <= set(await store.children("/ledgers/available")):
            await trio.sleep(0.1)
    per_ledger = max(1, args.mb * MB // args.entry_size // args.ledgers)
    held: dict[str, int] = {b: 0 for b in ids}
    payload = os.urandom(args.entry_size)
    async with BookKeeper(store, ClientConfig()) as bk:
        for _ in range(args.ledgers):
            lh = await bk.create_ledger(2, 2, 2)
            async with trio.open_nursery() as nursery:
                for _ in range(per_ledger):
                    nursery.start_soon(lh.add_entry, payload)
            await lh.close()
            for b in lh.metadata.last_ensemble:
                held[b] += per_ledger * args.entry_size
    victim = max(held, key=lambda b: held[b])
    proc, _, victim_dir = next(x for x in bookies if x[1] == victim)
    proc.kill()
    proc.wait()
    with trio.fail_after(60):
        while victim in set(await store.children("/ledgers/available")):
            await trio.sleep(0.1)
    survivors = [d[1] for _, b, d in bookies if b != victim]  # their ledger dirs
    copy_before = file_copy(victim_dir, survivors[0] / "copy-ref", held[victim])
    cfg = BookieConfig(rw_rereplicate_backoff_ms=200)
    metrics = AutoRecoveryMetrics()
    async with BookKeeper(store, ClientConfig()) as bk:
        auditor = Auditor(bk, cfg, metrics, "bench-auditor")
        registered = ids - {victim}
        marked = await auditor.audit(registered, set())
        worker = ReplicationWorker(bk, cfg, metrics, "bench-worker")
        urm = UnderReplicationManager(store)
        t0 = time.perf_counter()
        while [lid async for lid in urm.ledgers()]:
            await worker.run_once()
        elapsed = time.perf_counter() - t0
    copy_after = file_copy(victim_dir, survivors[1] / "copy-ref", held[victim])
    copied = int(metrics.rereplicated_bytes._value.get())
    ar_mbs = copied / MB / elapsed
    ref = statistics.fmean([copy_before, copy_after])
    return {
        "ledgers_marked": marked,
        "bytes_rereplicated": copied,
        "entries_rereplicated": int(metrics.rereplicated_entries._value.get()),
        "seconds": round(elapsed, 3),
        "autorecovery_mb_s": round(ar_mbs, 1),
        "file_copy_mb_s": [round(copy_before, 1), round(copy_after, 1)],
        "ratio_autorecovery_vs_file_copy": round(ar_mbs / ref, 4),
    }


async def main_async(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-ar-", dir=args.dir))
    zk = ZooKeeperServer(root / "zk")
    zk.start()
    try:
        rounds = []
        for i in range(args.rounds):
            r = await one_round(root / f"round{i}", zk, args, i)
            print(json.dumps(r), flush=True)
            rounds.append(r)
        return {
            "config": {"mb": args.mb, "entry_size": args.entry_size, "ledgers": args.ledgers, "rounds": args.rounds,
                       "ensemble": "E=WQ=AQ=2, 3 bookies, one SIGKILLed"},
            "rounds": rounds,
            "autorecovery_mb_s_median": statistics.median(r["autorecovery_mb_s"] for r in rounds),
            "ratio_median": statistics.median(r["ratio_autorecovery_vs_file_copy"] for r in rounds),
        }
    finally:
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=32, help="MB written in total (each entry on 2 bookies)")
    p.add_argument("--entry-size", type=int, default=16384)
    p.add_argument("--ledgers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--dir", default=None, help="where the bookies' data goes (default: the temp dir)")
    args = p.parse_args()
    result = trio.run(main_async, args)
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / "bench_autorecovery.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
