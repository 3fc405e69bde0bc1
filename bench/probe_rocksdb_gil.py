"""Does a synced RocksDB write (rocksdict) hold the GIL through its fsync?

A worker thread writes batches of 1,000 locations with ``sync = True`` (as the checkpoint's
EntryLocationIndex.put_encoded and LedgerMetadataIndex.put_batch do) every 10 ms while the main
thread spins reading the clock; prints the main thread's stalls (gaps over 1 ms) against the
writes' own time. Measured here: 170 writes of 1.9-2.2 ms, stalls summing to 366-422 ms in 3 s:
the write holds the GIL throughout, so each checkpoint's index writes stop the broker's event
loop for their fsync (``flush_wal(True)`` after an unsynced write is no better: 1,031 ms)::

    .venv/bin/python bench/probe_rocksdb_gil.py [--flush-wal]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

from rocksdict import Rdict, WriteBatch, WriteOptions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flush-wal", action="store_true", help="unsynced write, then flush_wal(True)")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    db = Rdict(tempfile.mkdtemp(prefix="probe-rocksdb-"))
    synced, plain = WriteOptions(), WriteOptions()
    synced.sync = True
    stop = threading.Event()
    took: list[float] = []

    def writer() -> None:
        while not stop.is_set():
            wb = WriteBatch()
            for i in range(1000):
                wb.put(i.to_bytes(8, "big"), b"x" * 16)
            t0 = time.perf_counter()
            if args.flush_wal:
                db.write(wb, plain)
                db.flush_wal(True)
            else:
                db.write(wb, synced)
            took.append(time.perf_counter() - t0)
            time.sleep(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    stalls = 0.0
    longest = 0.0
    last = time.perf_counter()
    end = last + args.seconds
    while last < end:
        now = time.perf_counter()
        if now - last > 0.001:
            stalls += now - last
            longest = max(longest, now - last)
        last = now
    stop.set()
    thread.join()
    db.close()
    took.sort()
    print(f"{len(took)} writes, median {took[len(took) // 2] * 1e3:.2f} ms; main thread stalled "
          f"{stalls * 1e3:.1f} ms in {args.seconds:.0f} s (longest {longest * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
