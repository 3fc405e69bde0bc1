"""Managed-ledger add and tail-read throughput against the raw ledger client, in one run.

Starts a real ZooKeeper and one real bookie, then with 1 KiB entries and the same number of
adds in flight measures, in paired rounds (``--entries`` adds per side and round, run as
two halves in ABBA order so load drift and a fuller bookie hit both sides alike):
* raw: ``LedgerHandle.add_entry`` on a ledger of the ledger client (the reference);
* managed: ``ManagedLedger.add_entry`` on one managed ledger (ordering, accounting, entry
  cache, rollover checks on top); the median of the per-round ratios managed/raw should
  stay above 0.85, and this process's CPU per add is reported for both (the bookie's work
  is the same for both, so the CPU difference is the managed ledger's cost);
* tail read: a caught-up cursor reading what was just added (served by the entry cache),
  against reading the same entries from the bookie through the ledger client.
Wall-clock rates are noisy on a shared machine, so the managed ledger's own cost is also
measured without any I/O: its CPU per add over an instant in-memory ledger handle against
that handle alone (``--profile`` prints where that time goes).
With ``--instructions`` (needs valgrind) the client's instructions per add are also counted
under callgrind for both sides, with instrumentation on only while pumping and the fixed
costs cancelled by differencing two run lengths: a load-independent overhead figure.
Prints the ratios and writes bench/results/bench_managed_ledger.json.

    .venv/bin/python bench/bench_managed_ledger.py [--entries 10000] [--inflight 500] [--rounds 12] [--profile] [--instructions]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import metadata  # noqa: E402
from bookie.client.bookkeeper import BookKeeper  # noqa: E402
from bookie.client.config import ClientConfig  # noqa: E402
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory  # noqa: E402
from tests.fixtures.processes import QuireProcess  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

ENTRY = b"x" * 1024
ML_CONFIG = ManagedLedgerConfig(
    ensemble_size=1, write_quorum=1, ack_quorum=1,
    metadata_ensemble_size=1, metadata_write_quorum=1, metadata_ack_quorum=1,
    cache_size_mb=256, retention_time_minutes=-1, retention_size_mb=-1,
)


async def pump(add: Callable[[bytes], Awaitable[Any]], total: int, inflight: int) -> tuple[float, float]:
    """`total` adds with `inflight` of them outstanding; returns (adds per second, this
    process's CPU microseconds per add)."""
    per_worker = total // inflight

    async def worker() -> None:
        for _ in range(per_worker):
            await add(ENTRY)

    start, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as n:
        for _ in range(inflight):
            n.start_soon(worker)
    done = per_worker * inflight
    return done / (time.perf_counter() - start), (time.process_time() - cpu) / done * 1e6


# ---------------------------------------------------------------- real bookie

async def run_bookie_rounds(zk_url: str, args: argparse.Namespace) -> dict[str, Any]:
    store = await metadata.open_store(zk_url)
    rates: dict[str, list[float]] = {"raw": [], "managed": [], "cache": [], "bookie": []}
    cpu: dict[str, list[float]] = {"raw": [], "managed": []}
    try:
        async with BookKeeper(store, ClientConfig()) as bk:
            with trio.fail_after(20):
                while not await bk.writable_bookies():
                    await trio.sleep(0.05)
            async with ManagedLedgerFactory(store, bk, ML_CONFIG) as factory:
                for r in range(args.rounds):
                    lh = await bk.create_ledger(1, 1, 1)
                    ml = await factory.open(f"bench/ns/persistent/t{r}")
                    tail = await ml.open_cursor("tail")  # caught up: reads what is added next
                    # ABBA (BAAB on odd rounds): a drift of the machine's load within a
                    # round hits both sides alike; each side's round figure is its mean
                    a, b = ("raw", lh.add_entry), ("managed", ml.add_entry)
                    got: dict[str, list[tuple[float, float]]] = {"raw": [], "managed": []}
                    for kind, add in [a, b, b, a] if r % 2 == 0 else [b, a, a, b]:
                        got[kind].append(await pump(add, args.entries // 2, args.inflight))
                    for kind, pair in got.items():
                        rates[kind].append(statistics.mean(x[0] for x in pair))
                        cpu[kind].append(statistics.mean(x[1] for x in pair))
                    # tail read from the entry cache
                    start = time.perf_counter()
                    n = 0
                    while batch := await tail.read_entries(500):
                        n += len(batch)
                    rates["cache"].append(n / (time.perf_counter() - start))
                    # the reference: the same number of entries from the bookie via the client
                    last = lh.last_add_confirmed
                    start = time.perf_counter()
                    m = 0
                    for first in range(0, last + 1, 500):
                        m += len(await lh.read(first, min(first + 499, last)))
                    rates["bookie"].append(m / (time.perf_counter() - start))
                    await lh.close()
                    await ml.close()
                    await factory.delete(ml.name)
                    await bk.delete_ledger(lh.ledger_id)
                    print(f"round {r}: raw {rates['raw'][-1]:.0f}/s ({cpu['raw'][-1]:.1f} us CPU/add)  "
                          f"managed {rates['managed'][-1]:.0f}/s ({cpu['managed'][-1]:.1f} us)  "
                          f"tail(cache) {rates['cache'][-1]:.0f}/s  read(bookie) {rates['bookie'][-1]:.0f}/s")
    finally:
        await store.close()
    ratios = [m / r for m, r in zip(rates["managed"], rates["raw"])]
    cpu_raw, cpu_ml = statistics.median(cpu["raw"]), statistics.median(cpu["managed"])
    cpu_diffs = [m - r for m, r in zip(cpu["managed"], cpu["raw"])]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {
        "raw_ledger_adds_per_s": round(statistics.median(rates["raw"])),
        "managed_ledger_adds_per_s": round(statistics.median(rates["managed"])),
        # paired per round (both measured back to back), median over rounds
        "managed_over_raw": round(statistics.median(ratios), 3),
        "managed_overhead_pct": round(100 * (1 - statistics.median(ratios)), 1),
        "managed_over_raw_iqr": [round(q1, 3), round(q3, 3)],
        "round_ratios": [round(x, 3) for x in ratios],
        "client_cpu_us_per_add_paired_diff": round(statistics.median(cpu_diffs), 2),
        "client_cpu_us_per_add_raw": round(cpu_raw, 2),
        "client_cpu_us_per_add_managed": round(cpu_ml, 2),
        "client_cpu_overhead_pct": round(100 * (cpu_ml / cpu_raw - 1), 1),
        "tail_read_cache_entries_per_s": round(statistics.median(rates["cache"])),
        "read_from_bookie_entries_per_s": round(statistics.median(rates["bookie"])),
        "tail_cache_over_bookie_read": round(statistics.median(rates["cache"]) / statistics.median(rates["bookie"]), 2),
        "raw_rates": [round(x) for x in rates["raw"]],
        "managed_rates": [round(x) for x in rates["managed"]],
    }


# ---------------------------------------------------------------- no I/O

class InstantLedger:
    """A ledger handle whose adds complete at once: the completions of the adds made in one
    scheduling pass run together in the next (as a real journal group commit answers them),
    so what remains of the managed ledger's add is its own per-entry work."""

    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self.last_add_confirmed = -1
        self.length = 0
        self._done: list[tuple[Any, int]] = []
        self._completer: trio.lowlevel.Task | None = None
        self._started = False

    def async_add_entry(self, data: bytes, callback: Any) -> None:
        self.last_add_confirmed += 1
        self._done.append((callback, self.last_add_confirmed))
        if not self._started:
            self._started = True
            trio.lowlevel.spawn_system_task(self._complete)
        elif self._completer is not None:
            task, self._completer = self._completer, None
            trio.lowlevel.reschedule(task)

    async def _complete(self) -> None:
        while True:
            if not self._done:
                self._completer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.SUCCEEDED)
                continue
            done, self._done = self._done, []
            for callback, eid in done:
                callback(eid, None)

    async def add_entry(self, data: bytes) -> int:
        task = trio.lowlevel.current_task()
        out: list[int] = []

        def done(eid: int, _err: object) -> None:
            out.append(eid)
            trio.lowlevel.reschedule(task)

        self.async_add_entry(data, done)
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        return out[0]

    async def close(self) -> None:
        pass


class InstantBookKeeper:
    def __init__(self) -> None:
        self._next_id = 1

    async def create_ledger(self, *args: Any, **kwargs: Any) -> InstantLedger:
        self._next_id += 1
        return InstantLedger(self._next_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        pass


async def run_instant_rounds(args: argparse.Namespace) -> dict[str, Any]:
    store = await metadata.open_store("memory://bench-ml")
    cpu: dict[str, list[float]] = {"raw": [], "managed": []}
    profile = cProfile.Profile() if args.profile else None
    async with ManagedLedgerFactory(store, InstantBookKeeper(), ML_CONFIG) as factory:
        for r in range(max(args.rounds, 5)):
            ml = await factory.open(f"instant/ns/persistent/t{r}")
            await ml.open_cursor("tail")  # adds go to the entry cache, as with a consumer
            handle = InstantLedger(0)
            cpu["raw"].append((await pump(handle.add_entry, 4 * args.entries, args.inflight))[1])
            if profile is not None and r == 0:
                profile.enable()
            cpu["managed"].append((await pump(ml.add_entry, 4 * args.entries, args.inflight))[1])
            if profile is not None and r == 0:
                profile.disable()
            await ml.close()
    await store.close()
    if profile is not None:
        print("where the managed ledger's add time goes (instant ledger, cProfile):")
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    raw, managed = statistics.median(cpu["raw"]), statistics.median(cpu["managed"])
    return {
        "instant_cpu_us_per_add_raw": round(raw, 2),
        "instant_cpu_us_per_add_managed": round(managed, 2),
        "managed_ledger_cpu_us_per_add": round(managed - raw, 2),
    }


# ---------------------------------------------------------------- instruction counts

async def callgrind_child(kind: str, n: int, zk_url: str, inflight: int) -> None:
    """Runs under valgrind: pump `n` adds of one side with instrumentation on, then dump."""
    def ctl(*a: str) -> None:
        subprocess.run(["callgrind_control", *a, str(os.getpid())], check=True, capture_output=True)

    store = await metadata.open_store(zk_url)
    try:
        # valgrind slows this process ~50x: generous add timeout
        async with BookKeeper(store, ClientConfig(add_entry_timeout_s=120)) as bk:
            while not await bk.writable_bookies():
                await trio.sleep(0.05)
            async with ManagedLedgerFactory(store, bk, ML_CONFIG) as factory:
                lh = await bk.create_ledger(1, 1, 1)
                ml = await factory.open(f"callgrind/ns/persistent/{kind}-{n}-{os.getpid()}")
                await ml.open_cursor("tail")
                add = lh.add_entry if kind == "raw" else ml.add_entry
                await pump(add, 200, min(inflight, 200))  # warm up both paths
                await trio.to_thread.run_sync(ctl, "-i", "on")
                await pump(add, n, inflight)
                await trio.to_thread.run_sync(ctl, "-i", "off")
                await trio.to_thread.run_sync(ctl, "-d")
    finally:
        await store.close()


def count_instructions(zk_url: str, root: Path, inflight: int) -> dict[str, Any]:
    """Client instructions per add of each side: (I(3000) - I(1000)) / 2000."""
    per_add: dict[str, float] = {}
    for kind in ("raw", "managed"):
        totals = []
        for n in (1000, 3000):
            out = root / f"callgrind.{kind}.{n}"
            subprocess.run(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p",
                 sys.executable, __file__, "--callgrind-child", kind, str(n), zk_url, str(inflight)],
                check=True, capture_output=True, timeout=900,
            )
            dump = next(root.glob(f"callgrind.{kind}.{n}.*.1"))  # the dump taken after the pump
            totals.append(next(int(line.split()[1]) for line in dump.read_text().splitlines() if line.startswith("totals:")))
        per_add[kind] = (totals[1] - totals[0]) / 2000
    return {
        "instructions_per_add_raw": round(per_add["raw"]),
        "instructions_per_add_managed": round(per_add["managed"]),
        "instructions_overhead_pct": round(100 * (per_add["managed"] / per_add["raw"] - 1), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10000)
    ap.add_argument("--inflight", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--profile", action="store_true", help="cProfile the managed ledger's add path")
    ap.add_argument("--instructions", action="store_true", help="count instructions per add under callgrind")
    ap.add_argument("--callgrind-child", nargs=4, metavar=("KIND", "N", "ZK_URL", "INFLIGHT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.callgrind_child:
        kind, n, zk_url, inflight = args.callgrind_child
        trio.run(callgrind_child, kind, int(n), zk_url, int(inflight))
        return
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind")
    results: dict[str, Any] = {
        "entry_size": len(ENTRY), "entries_per_round": args.entries, "inflight": args.inflight, "rounds": args.rounds,
    }
    results.update(trio.run(run_instant_rounds, args))
    with tempfile.TemporaryDirectory(prefix="bench-ml-") as tmp:
        root = Path(tmp)
        zk = ZooKeeperServer(root / "zk")
        zk.start()
        bookie = None
        try:
            zk.ensure_path("/bench")
            zk_url = zk.url("/bench")
            bookie = QuireProcess.quire(
                ["bookie", "--metadata-url", zk_url, "--port", "0", "--http-port", "0",
                 "--journal-dir", str(root / "journal"), "--ledger-dirs", str(root / "ledgers"),
                 "--set", "db_storage_write_cache_max_size_mb=256", "--log-level", "WARNING"],
                log_path=root / "bookie.log", ready_log=r"ready \(port \d+",
            )
            bookie.start()
            bookie.wait_ready(30)
            results.update(trio.run(run_bookie_rounds, zk_url, args))
            if args.instructions:
                results.update(count_instructions(zk_url, root, args.inflight))
        finally:
            if bookie is not None:
                bookie.kill()
            zk.kill()
    print(
        f"add 1 KiB: raw ledger client {results['raw_ledger_adds_per_s']}/s, managed ledger "
        f"{results['managed_ledger_adds_per_s']}/s -> median paired ratio {results['managed_over_raw']} "
        f"(IQR {results['managed_over_raw_iqr']}; overhead {results['managed_overhead_pct']}%; goal < 15%)"
    )
    print(
        f"client CPU per add: raw {results['client_cpu_us_per_add_raw']} us, managed "
        f"{results['client_cpu_us_per_add_managed']} us (+{results['client_cpu_overhead_pct']}%, median paired "
        f"difference {results['client_cpu_us_per_add_paired_diff']} us; "
        f"the bookie's CPU is the same for both)"
    )
    print(
        f"managed ledger's own CPU per add (no I/O): {results['managed_ledger_cpu_us_per_add']} us "
        f"({results['instant_cpu_us_per_add_managed']} vs {results['instant_cpu_us_per_add_raw']} us)"
    )
    print(
        f"tail read: entry cache {results['tail_read_cache_entries_per_s']}/s vs bookie read "
        f"{results['read_from_bookie_entries_per_s']}/s -> x{results['tail_cache_over_bookie_read']}"
    )
    if args.instructions:
        print(
            f"client instructions per add (callgrind, load-independent): raw {results['instructions_per_add_raw']}, "
            f"managed {results['instructions_per_add_managed']} (+{results['instructions_overhead_pct']}%)"
        )
    out = REPO / "bench" / "results" / "bench_managed_ledger.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
