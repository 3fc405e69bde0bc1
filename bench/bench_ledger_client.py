"""Ledger client benchmark: quorum adds through ``bookie.client`` vs raw replication, and recovery time.

Starts a real ZooKeeper and 3 real bookie processes (journal fdatasync on). Then, in one run:

* **reference**: raw replication with the wire codec only: each 1 KiB entry packed once and
  sent to its 2 write-set bookies over one pipelined connection per bookie, counted when both
  acked, with the same number of outstanding entries. No metadata, ordering or failure logic.
* **client**: ``LedgerHandle.add_entry`` with E=3 WQ=2 AQ=2, the same outstanding count
  (one task per outstanding add, as the managed ledger does).
* **recovery**: a ledger with 100k entries left open; another client opens it with recovery
  (fence + recovery reads + close); the time is printed.
* **reads**: 20k entries of an E=3 WQ=3 ledger read back 1000 per call: range reads (one
  RANGE_READ per call, E == WQ) against the reference of entry-by-entry reads of the same
  entries (``PendingReadOp``, what E > WQ ledgers use).

Prints adds/s, p50/p99 latency and the ratio client/reference; writes
``bench/results/bench_ledger_client.json``.

    .venv/bin/python bench/bench_ledger_client.py [--seconds 5] [--outstanding 1000] [--recovery-entries 100000]
        [--read-entries 20000]
"""

from __future__ import annotations

import argparse
import json
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
from bookie import entry_format  # noqa: E402
from bookie.client import BookKeeper, ClientConfig  # noqa: E402
from bookie.client.distribution import write_set  # noqa: E402
from bookie.client.ledger_metadata import master_key  # noqa: E402
from bookie.client.read_ops import PendingReadOp  # noqa: E402
from bookie.protocol import FrameDecoder, Op, Request, decode_response, encode_request  # noqa: E402
from tests.fixtures.processes import free_port, port_open  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402

PAYLOAD = b"x" * 1024
_now = time.monotonic


def start_bookie(root: Path, zk_url: str, i: int, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """A `quire bookie` with journal ``root/j<i>`` and ledgers ``root/l<i>``; ``extra`` = more arguments."""
    port, http = free_port(), free_port()
    cmd = [
        sys.executable, "-m", "quire", "bookie", "--metadata-url", zk_url, "--port", str(port),
        "--http-port", str(http), "--journal-dir", str(root / f"j{i}"), "--ledger-dirs", str(root / f"l{i}"),
        "--log-level", "WARNING", *extra,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not port_open("127.0.0.1", port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("bookie did not start")
        time.sleep(0.1)
    return proc, f"127.0.0.1:{port}"


def summary(latencies: list[float], count: int, elapsed: float, cpu_s: float) -> dict:
    lat = sorted(latencies)
    return {
        # CPU of this (client) process per entry: the client's own cost, whatever the bookies do
        "client_cpu_us_per_entry": round(cpu_s / max(count, 1) * 1e6, 1),
        "adds_per_s": round(count / elapsed, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 2) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2) if lat else None,
        "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
        "entries": count,
        "seconds": round(elapsed, 2),
    }


async def raw_replication(bk: BookKeeper, seconds: float, outstanding: int) -> dict:
    """Reference: pack once, send to the write set, count when both replicas acked."""
    lh = await bk.create_ledger(3, 2, 2)  # only for a ledger id the bookies accept, and its ensemble
    ledger_id, bookies, key = lh.ledger_id, lh.metadata.last_ensemble, master_key(b"")
    errors = 0
    streams = []
    for b in bookies:
        host, port = b.rsplit(":", 1)
        streams.append(await trio.open_tcp_stream(host, int(port)))
    # The window is a counter (a per-entry Semaphore.acquire would cost a scheduler pass per
    # entry and make the reference slower than the client it is meant to bound).
    in_flight = 0
    room = trio.Event()
    pending: dict[int, list] = {}  # entry -> [acks left, start]
    latencies: list[float] = []
    done = 0
    stop = trio.current_time() + seconds
    out: list[list[bytes]] = [[] for _ in bookies]
    wake = [trio.Event() for _ in bookies]

    async def writer(i: int) -> None:
        while True:
            if not out[i]:
                await wake[i].wait()
                wake[i] = trio.Event()
                continue
            buf, out[i] = b"".join(out[i]), []
            await streams[i].send_all(buf)

    async def reader(i: int) -> None:
        nonlocal done, errors, in_flight
        dec = FrameDecoder()
        while True:
            data = await streams[i].receive_some(256 * 1024)
            if not data:
                return
            for frame in dec.feed(data):
                r = decode_response(frame)
                if r.status != 0:
                    errors += 1
                p = pending[r.entry_id]
                p[0] -= 1
                if p[0] == 0:
                    del pending[r.entry_id]
                    latencies.append(_now() - p[1])
                    done += 1
                    in_flight -= 1
                    room.set()

    async with trio.open_nursery() as n:
        for i in range(len(bookies)):
            n.start_soon(writer, i)
            n.start_soon(reader, i)
        t0 = trio.current_time()
        c0 = time.process_time()
        e = 0
        while trio.current_time() < stop:
            if in_flight >= outstanding:
                room = trio.Event()
                await room.wait()
                continue
            in_flight += 1
            data = entry_format.pack_entry(ledger_id, e, e - 1, (e + 1) * len(PAYLOAD), PAYLOAD)
            pending[e] = [2, _now()]
            for idx in write_set(e, 3, 2):
                out[idx].append(encode_request(Request(Op.ADD, e, ledger_id, e, 0, key, data)))
                wake[idx].set()
            e += 1
        while pending:
            await trio.sleep(0.01)
        elapsed = trio.current_time() - t0
        cpu = time.process_time() - c0
        n.cancel_scope.cancel()
    for s in streams:
        await s.aclose()
    if errors:
        raise RuntimeError(f"{errors} raw adds failed")
    return summary(latencies, done, elapsed, cpu)


async def client_adds(bk: BookKeeper, seconds: float, outstanding: int) -> dict:
    lh = await bk.create_ledger(3, 2, 2)
    latencies: list[float] = []
    stop = _now() + seconds

    async def worker() -> None:
        while (t := _now()) < stop:
            await lh.add_entry(PAYLOAD)
            latencies.append(_now() - t)

    t0 = trio.current_time()
    c0 = time.process_time()
    async with trio.open_nursery() as n:
        for _ in range(outstanding):
            n.start_soon(worker)
    elapsed = trio.current_time() - t0
    cpu = time.process_time() - c0
    await lh.close()
    return summary(latencies, len(latencies), elapsed, cpu)


async def recovery_time(store_url: str, bk: BookKeeper, entries: int, outstanding: int) -> dict:
    lh = await bk.create_ledger(3, 2, 2)
    left = entries

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await lh.add_entry(PAYLOAD)

    t0 = time.monotonic()
    async with trio.open_nursery() as n:
        for _ in range(outstanding):
            n.start_soon(worker)
    write_s = time.monotonic() - t0
    # the writer is abandoned (never closed); a second client recovers the ledger
    store2 = await metadata.open_store(store_url)
    try:
        async with BookKeeper(store2, ClientConfig()) as bk2:
            t0 = time.monotonic()
            rh = await bk2.open_ledger(lh.ledger_id, recovery=True)
            rec_s = time.monotonic() - t0
            assert rh.last_add_confirmed == entries - 1, rh.last_add_confirmed
    finally:
        await store2.close()
    return {"entries": entries, "write_seconds": round(write_s, 2), "recovery_seconds": round(rec_s, 3),
            "last_entry_id": rh.last_add_confirmed}


async def reads(bk: BookKeeper, entries: int, outstanding: int) -> dict:
    lh = await bk.create_ledger(3, 3, 2)
    left = entries

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await lh.add_entry(PAYLOAD)

    async with trio.open_nursery() as n:
        for _ in range(outstanding):
            n.start_soon(worker)
    result = {}
    for name in ("entry_by_entry", "range"):
        t0, c0 = _now(), time.process_time()
        for lo in range(0, entries, 1000):
            hi = min(entries, lo + 1000) - 1
            if name == "range":
                got = await lh.read(lo, hi)
                assert len(got) == hi - lo + 1
            else:
                await PendingReadOp(bk, lh.ledger_id, lh.metadata, lo, hi).run()
        elapsed, cpu = _now() - t0, time.process_time() - c0
        result[name] = {"entries_per_s": round(entries / elapsed), "client_cpu_us_per_entry": round(cpu / entries * 1e6, 1)}
    result["ratio_range_vs_entry_by_entry"] = round(
        result["range"]["entries_per_s"] / result["entry_by_entry"]["entries_per_s"], 2)
    return result


async def main_async(args: argparse.Namespace, zk_url: str, bookies: list[str]) -> dict:
    store = await metadata.open_store(zk_url)
    try:
        with trio.fail_after(60):
            while not set(bookies) <= set(await store.children("/ledgers/available")):
                await trio.sleep(0.2)
        async with BookKeeper(store, ClientConfig()) as bk:
            ref = await raw_replication(bk, args.seconds, args.outstanding)
            client = await client_adds(bk, args.seconds, args.outstanding)
            rec = await recovery_time(zk_url, bk, args.recovery_entries, args.outstanding)
            rd = await reads(bk, args.read_entries, args.outstanding)
    finally:
        await store.close()
    return {"reference_raw_replication": ref, "client": client, "recovery": rec, "reads": rd,
            "ratio_client_vs_raw": round(client["adds_per_s"] / ref["adds_per_s"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--outstanding", type=int, default=1000)
    ap.add_argument("--recovery-entries", type=int, default=100_000)
    ap.add_argument("--read-entries", type=int, default=20_000)
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-lc-", dir=args.dir))
    zk = ZooKeeperServer(root / "zk")
    procs: list[subprocess.Popen] = []
    try:
        zk.start()
        zk.ensure_path("/bench")
        zk_url = zk.url("/bench")
        bookies = []
        for i in range(3):
            p, bid = start_bookie(root, zk_url, i)
            procs.append(p)
            bookies.append(bid)
        result = trio.run(main_async, args, zk_url, bookies)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
    result.update({"entry_size": len(PAYLOAD), "ensemble": [3, 2, 2], "outstanding": args.outstanding})
    ref, cl, rec = result["reference_raw_replication"], result["client"], result["recovery"]
    print(f"raw replication (reference): {ref['adds_per_s']:>9.0f} adds/s  p50 {ref['p50_ms']} ms  p99 {ref['p99_ms']} ms")
    print(f"ledger client E3/WQ2/AQ2:    {cl['adds_per_s']:>9.0f} adds/s  p50 {cl['p50_ms']} ms  p99 {cl['p99_ms']} ms")
    print(f"ratio client / raw: {result['ratio_client_vs_raw']:.2f}  (client CPU/entry: "
          f"{cl['client_cpu_us_per_entry']} us vs raw {ref['client_cpu_us_per_entry']} us)")
    print(f"recovery of a {rec['entries']}-entry open ledger (fence + close): {rec['recovery_seconds']} s")
    rd = result["reads"]
    print(f"reads E3/WQ3, 1000 per call: range {rd['range']['entries_per_s']} entries/s "
          f"({rd['range']['client_cpu_us_per_entry']} us CPU) vs entry by entry {rd['entry_by_entry']['entries_per_s']} "
          f"({rd['entry_by_entry']['client_cpu_us_per_entry']} us): ratio {rd['ratio_range_vs_entry_by_entry']}")
    out = REPO / "bench" / "results" / "bench_ledger_client.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
