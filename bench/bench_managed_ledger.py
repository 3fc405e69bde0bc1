"""Managed-ledger add and tail-read throughput against the raw ledger client, in one run.

Starts a real ZooKeeper and one real bookie, then with 1 KiB entries and the same number of
adds in flight measures, alternating so both see the same machine state:
* raw: ``LedgerHandle.add_entry`` on a ledger of the ledger client (the reference);
* managed: ``ManagedLedger.add_entry`` on one managed ledger (ordering, accounting, entry
  cache, rollover checks on top); the ratio managed/raw should stay above 0.85;
* tail read: a caught-up cursor reading what was just added (served by the entry cache),
  against reading the same entries from the bookie through the ledger client.
Prints the ratios and writes bench/results/bench_managed_ledger.json.

    .venv/bin/python bench/bench_managed_ledger.py [--entries 20000] [--inflight 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import metadata  # noqa: E402
from bookie.client.bookkeeper import BookKeeper  # noqa: E402
from bookie.client.config import ClientConfig  # noqa: E402
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory  # noqa: E402
from tests.fixtures.processes import QuireProcess, free_port  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

ENTRY = b"x" * 1024


CPU_US: dict[str, list[float]] = {"raw": [], "managed": []}


async def pump(add, total: int, inflight: int, kind: str = "raw") -> float:
    """`total` adds with `inflight` of them outstanding; returns adds per second and records
    this process's CPU microseconds per add (robust against other load on the machine)."""
    per_worker = total // inflight

    async def worker() -> None:
        for _ in range(per_worker):
            await add(ENTRY)

    start, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as n:
        for _ in range(inflight):
            n.start_soon(worker)
    done = per_worker * inflight
    CPU_US[kind].append((time.process_time() - cpu) / done * 1e6)
    return done / (time.perf_counter() - start)


async def run(zk_url: str, args: argparse.Namespace) -> dict:
    store = await metadata.open_store(zk_url)
    config = ManagedLedgerConfig(
        ensemble_size=1, write_quorum=1, ack_quorum=1,
        metadata_ensemble_size=1, metadata_write_quorum=1, metadata_ack_quorum=1,
        cache_size_mb=256, retention_time_minutes=-1, retention_size_mb=-1,
    )
    raw_rates, ml_rates, cache_rates, bookie_rates = [], [], [], []
    async with BookKeeper(store, ClientConfig()) as bk:
        with trio.fail_after(20):
            while not await bk.writable_bookies():
                await trio.sleep(0.05)
        async with ManagedLedgerFactory(store, bk, config) as factory:
            for r in range(args.rounds):
                lh = await bk.create_ledger(1, 1, 1)
                ml = await factory.open(f"bench/ns/persistent/t{r}")
                tail = await ml.open_cursor("tail")  # caught up: reads what is added next
                # alternate which goes first so neither always meets a fuller bookie
                if r % 2 == 0:
                    raw_rates.append(await pump(lh.add_entry, args.entries, args.inflight))
                    ml_rates.append(await pump(ml.add_entry, args.entries, args.inflight, "managed"))
                else:
                    ml_rates.append(await pump(ml.add_entry, args.entries, args.inflight, "managed"))
                    raw_rates.append(await pump(lh.add_entry, args.entries, args.inflight))
                # tail read from the entry cache
                start = time.perf_counter()
                n = 0
                while batch := await tail.read_entries(500):
                    n += len(batch)
                cache_rates.append(n / (time.perf_counter() - start))
                # the reference: the same number of entries from the bookie via the client
                last = lh.last_add_confirmed
                start = time.perf_counter()
                m = 0
                for first in range(0, last + 1, 500):
                    m += len(await lh.read(first, min(first + 499, last)))
                bookie_rates.append(m / (time.perf_counter() - start))
                await lh.close()
                await ml.close()
                print(f"round {r}: raw {raw_rates[-1]:.0f}/s  managed {ml_rates[-1]:.0f}/s  "
                      f"tail(cache) {cache_rates[-1]:.0f}/s  read(bookie) {bookie_rates[-1]:.0f}/s")
    await store.close()
    # medians: the machine is shared, single rounds are noisy
    raw, managed = statistics.median(raw_rates), statistics.median(ml_rates)
    cache, bookie_read = statistics.median(cache_rates), statistics.median(bookie_rates)
    ratio = statistics.median(m / r for m, r in zip(ml_rates, raw_rates))
    return {
        "entry_size": len(ENTRY),
        "entries_per_round": args.entries,
        "inflight": args.inflight,
        "rounds": args.rounds,
        "raw_ledger_adds_per_s": round(raw),
        "managed_ledger_adds_per_s": round(managed),
        # paired per round (both measured back to back), median over rounds
        "managed_over_raw": round(ratio, 3),
        "managed_overhead_pct": round(100 * (1 - ratio), 1),
        "client_cpu_us_per_add_raw": round(statistics.median(CPU_US["raw"]), 1),
        "client_cpu_us_per_add_managed": round(statistics.median(CPU_US["managed"]), 1),
        "round_ratios": [round(m / r, 3) for m, r in zip(ml_rates, raw_rates)],
        "tail_read_cache_entries_per_s": round(cache),
        "read_from_bookie_entries_per_s": round(bookie_read),
        "tail_cache_over_bookie_read": round(cache / bookie_read, 2),
        "raw_rates": [round(x) for x in raw_rates],
        "managed_rates": [round(x) for x in ml_rates],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--inflight", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ml-") as tmp:
        root = Path(tmp)
        zk = ZooKeeperServer(root / "zk")
        zk.start()
        bookie = None
        try:
            zk.ensure_path("/bench")
            zk_url = zk.url("/bench")
            port = free_port()
            bookie = QuireProcess.quire(
                ["bookie", "--metadata-url", zk_url, "--port", str(port), "--http-port", "0",
                 "--journal-dir", str(root / "journal"), "--ledger-dirs", str(root / "ledgers"),
                 "--set", "db_storage_write_cache_max_size_mb=256", "--log-level", "WARNING"],
                log_path=root / "bookie.log", ready_port=port,
            )
            bookie.start()
            bookie.wait_ready(30)
            results = trio.run(run, zk_url, args)
        finally:
            if bookie is not None:
                bookie.kill()
            zk.kill()
    print(
        f"add 1 KiB: raw ledger client {results['raw_ledger_adds_per_s']}/s, managed ledger "
        f"{results['managed_ledger_adds_per_s']}/s -> ratio {results['managed_over_raw']} "
        f"(overhead {results['managed_overhead_pct']}%)"
    )
    print(
        f"client CPU per add: raw {results['client_cpu_us_per_add_raw']} us, managed "
        f"{results['client_cpu_us_per_add_managed']} us (the bookie's CPU is the same for both)"
    )
    print(
        f"tail read: entry cache {results['tail_read_cache_entries_per_s']}/s vs bookie read "
        f"{results['read_from_bookie_entries_per_s']}/s -> x{results['tail_cache_over_bookie_read']}"
    )
    out = REPO / "bench" / "results" / "bench_managed_ledger.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
