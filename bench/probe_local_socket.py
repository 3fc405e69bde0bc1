"""Paired CPU per add of the ledger client and its bookies: local Unix socket vs loopback TCP.

Starts a real ZooKeeper; each round starts 2 `quire bookie` processes (journals in the given
dir, fdatasync on) with ``local_socket_enabled`` true or false (alternating the order per
round), then this process's ``BookKeeper`` adds ``--entries`` 100 B entries one at a time, paced
at ``--rate`` per second, to an E=WQ=AQ=2 ledger (the broker's remote add path without the
broker). CPU from /proc/PID/stat (the bookies) and the process CPU clock (the client), per add.

    PYTHONPATH=$PWD .venv/bin/python bench/probe_local_socket.py [--rounds 6] [--entries 2000] [--rate 500]
"""

from __future__ import annotations

import argparse
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
from bench.bench_ledger_client import start_bookie  # noqa: E402
from bookie.client import BookKeeper, ClientConfig  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


async def one_round(zk_url: str, root: Path, local: bool, entries: int, rate: float) -> dict:
    extra = ("--set", f"local_socket_enabled={'true' if local else 'false'}")
    bookies = [start_bookie(root, zk_url, i, extra) for i in range(2)]
    try:
        store = await metadata.open_store(zk_url)
        try:
            ids = {b[1] for b in bookies}
            with trio.fail_after(30):
                while not ids <= set(await store.children("/ledgers/available")):
                    await trio.sleep(0.05)
            async with BookKeeper(store, ClientConfig()) as bk:
                lh = await bk.create_ledger(2, 2, 2)
                for i in range(50):  # connect and warm up
                    await lh.add_entry(b"w" * 100)
                transports = sorted(c.transport for c in bk.ctx._pool._conns.values())  # type: ignore[union-attr]
                cpu0 = [proc_cpu_s(p.pid) for p, _ in bookies]
                c0 = time.process_time()
                lat = []
                period = 1.0 / rate
                nxt = time.monotonic()
                for i in range(entries):
                    nxt += period
                    t = time.monotonic()
                    await lh.add_entry(b"x" * 100)
                    lat.append(time.monotonic() - t)
                    delay = nxt - time.monotonic()
                    if delay > 0:
                        await trio.sleep(delay)
                client = (time.process_time() - c0) / entries * 1e6
                bookie = sum(proc_cpu_s(p.pid) - c for (p, _), c in zip(bookies, cpu0)) / 2 / entries * 1e6
                await lh.close()
        finally:
            await store.close()
    finally:
        for p, _ in bookies:
            p.kill()
            p.wait()
    lat.sort()
    return {"transport": ",".join(transports), "client_us": client, "bookie_us": bookie,
            "p50_us": lat[len(lat) // 2] * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--dir", default="/tmp", help="where the journals go (disk: /tmp here; tmpfs: /dev/shm)")
    args = ap.parse_args()
    rows: dict[bool, list[dict]] = {True: [], False: []}
    zk_root = Path(tempfile.mkdtemp(prefix="probe-local-zk-"))
    with ZooKeeperServer(zk_root / "zk") as zk:
        for r in range(args.rounds):
            for local in ((True, False) if r % 2 == 0 else (False, True)):
                root = Path(tempfile.mkdtemp(prefix="probe-local-", dir=args.dir))
                try:
                    load = os.getloadavg()[0]
                    row = trio.run(one_round, zk.url(f"/probe{r}{int(local)}"), root, local, args.entries, args.rate)
                finally:
                    shutil.rmtree(root, ignore_errors=True)
                row["load"] = load
                rows[local].append(row)
                print(f"round {r + 1} {row['transport']:<9} load {load:4.1f}  client {row['client_us']:5.0f} µs/add  "
                      f"bookie {row['bookie_us']:5.0f} µs/add  p50 {row['p50_us']:6,.0f}  p99 {row['p99_us']:7,.0f} µs",
                      flush=True)
    for local, rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("client_us", "bookie_us", "p50_us", "p99_us")}
        print(f"median {'unix' if local else 'tcp':<5} client {med['client_us']:5.0f}  bookie {med['bookie_us']:5.0f}  "
              f"p50 {med['p50_us']:6,.0f}  p99 {med['p99_us']:7,.0f} µs")
    shutil.rmtree(zk_root, ignore_errors=True)


if __name__ == "__main__":
    main()
