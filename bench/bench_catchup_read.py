"""CPU per entry of the catch-up read path alone, in one process: A/B between checkouts.

``bench/bench_catchup.py`` times the whole pipeline (standalone, official client, two cores
shared by three busy threads), whose CPU figures move by +-1 us a message with the machine's
load. This one isolates what a cursor far behind costs the broker per entry: an in-process
bookie reached as ``quire standalone`` reaches it (``local_bookies``), a managed ledger of
``--entries`` unbatched 100 B messages (as stored: metadata + payload), then
* cached: a cursor reads them right after they were added (the entry cache), and
* catch-up: a second cursor reads them after the managed ledger was reopened and the bookie's
  caches dropped (after a checkpoint: every entry comes from the entry logs), with read-ahead
  as the dispatcher drives it (``read_entries(100)`` then ``read_ahead`` sized by 1 MiB).
Each checkout (``--repo``, default this one) runs in its own subprocess, in interleaved rounds
(A B A B ...); the figure is the process's CPU time (all threads, user + system) per entry
read, median over rounds.

    .venv/bin/python bench/bench_catchup_read.py [--repo DIR ...] [--entries 200000] [--rounds 5]
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

REPO = Path(__file__).resolve().parents[1]

READ_AHEAD_BYTES = 1024 * 1024  # the broker's dispatcher_read_ahead_max_bytes default
READ = 100  # dispatcher_max_read_batch_size


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _child(entries: int, root: Path) -> dict[str, float]:
    import uuid

    import trio

    from bookie.bookie import Bookie
    from bookie.client import BookKeeper
    from bookie.client.config import ClientConfig
    from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
    from metadata import open_store
    from tests.bookie.helpers import make_config

    # a stored unbatched message: the metadata the official client writes, then 100 B
    data = bytes.fromhex("0000002f") + b"\x0a\x0cstandalone-0\x10\x01\x18\xb8\x8f\xa7\xd5\xcb\x32" + os.urandom(21) + os.urandom(100)
    config = ManagedLedgerConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, metadata_ensemble_size=1,
                                 metadata_write_quorum=1, metadata_ack_quorum=1, cache_size_mb=256,
                                 retention_time_minutes=-1, retention_size_mb=-1)
    store = await open_store(f"memory://catchup-read-{uuid.uuid4().hex}")
    out: dict[str, float] = {}
    async with trio.open_nursery() as nursery:
        bookie = Bookie(make_config(root, db_storage_write_cache_max_size_mb=64), store)
        await bookie.start(nursery)
        async with BookKeeper(store, ClientConfig(), local_bookies={bookie.bookie_id: bookie.processor}) as bk:
            async with ManagedLedgerFactory(store, bk, config) as factory:
                ml = await factory.open("bench/ns/persistent/catchup")
                cached = await ml.open_cursor("cached")
                behind = await ml.open_cursor("behind")
                sem = trio.Semaphore(1000)

                async def add() -> None:
                    async with sem:
                        await ml.add_entry(data)

                async with trio.open_nursery() as adds:
                    for _ in range(entries):
                        await sem.acquire()
                        sem.release()
                        adds.start_soon(add)
                cpu0, t0 = _cpu(), time.perf_counter()
                n = 0
                while batch := await cached.read_entries(READ):
                    n += len(batch)
                out["cached_cpu_us"] = (_cpu() - cpu0) / n * 1e6
                out["cached_per_s"] = n / (time.perf_counter() - t0)
                await ml.close()
                await bookie.sync_thread.checkpoint()  # everything into the entry logs
                bookie.storage.read_cache = type(bookie.storage.read_cache)(1 << 20)
                ml = await factory.open("bench/ns/persistent/catchup")
                behind = await ml.open_cursor("behind")
                ahead = max(READ, READ_AHEAD_BYTES // len(data))
                cpu0, t0 = _cpu(), time.perf_counter()
                n = 0
                while batch := await behind.read_entries(READ):
                    n += len(batch)
                    behind.read_ahead(ahead)
                out["catch_up_cpu_us"] = (_cpu() - cpu0) / n * 1e6
                out["catch_up_per_s"] = n / (time.perf_counter() - t0)
                out["entries"] = n
                await ml.close()
        await bookie.close()
        nursery.cancel_scope.cancel()
    await store.close()
    return out


def run_child(repo: Path, entries: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-catchup-read-"))
    try:
        env = dict(os.environ, PYTHONPATH=str(repo))
        res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(entries), str(root)],
                             cwd=repo, env=env, check=True, capture_output=True, text=True, timeout=900)
        return json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", metavar="DIR", help="checkout to measure (repeat for an A/B)")
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_catchup_read.json"))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        import gc

        import trio

        gc.freeze()  # the broker's collector settings (broker/cli.py)
        gc.set_threshold(50_000, 20, 100)

        sys.path.insert(0, os.getcwd())
        print(json.dumps(trio.run(_child, int(args.child[0]), Path(args.child[1]))))
        return
    repos = [Path(r).absolute() for r in (args.repo or [str(REPO)])]
    tags = [f"{i}-{r.name}" for i, r in enumerate(repos)]
    rounds: dict[str, list[dict[str, float]]] = {t: [] for t in tags}
    for rnd in range(args.rounds):
        for repo, tag in zip(repos, tags):
            r = run_child(repo, args.entries)
            rounds[tag].append(r)
            print(f"round {rnd} {tag}: cached {r['cached_cpu_us']:.2f} us/entry ({r['cached_per_s']:,.0f}/s) | "
                  f"catch-up {r['catch_up_cpu_us']:.2f} us/entry ({r['catch_up_per_s']:,.0f}/s) | load {os.getloadavg()[0]:.1f}",
                  flush=True)
    median = {t: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for t, rs in rounds.items()}
    for t, m in median.items():
        print(f"median {t}: cached {m['cached_cpu_us']:.2f} us/entry, catch-up {m['catch_up_cpu_us']:.2f} us/entry "
              f"(catch-up - cached: {m['catch_up_cpu_us'] - m['cached_cpu_us']:.2f})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"entries": args.entries, "repos": [str(r) for r in repos], "rounds": rounds,
                                          "median": median, "load_avg": os.getloadavg()}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
