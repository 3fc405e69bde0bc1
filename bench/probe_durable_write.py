"""What one durable journal write costs the writing thread, by the way the file was prepared.

The journal makes each group durable with one ``pwritev2(RWF_DSYNC)`` into a preallocated file
(bookie/journal.py). On disk that system call, not Python, is most of what a lone unbatched add
costs beyond tmpfs: this probe appends records of ``--size`` bytes one durable write at a time,
as a one-at-a-time producer makes the journal do, and prints per write the CPU time of the
writing thread (user + system), its sleeps (voluntary context switches: the data write's and
the cache flush's I/O waits) and the wall time, for each preparation of the file:

- ``fallocate``: posix_fallocate'd extents (what the journal does);
- ``zeros``: the same range written with zeros first (no unwritten extents to convert);
- ``sparse``: nothing prepared (every write allocates blocks);
- ``direct``: zeros first, then O_DIRECT writes of whole 4 KiB blocks (the tail block rewritten
  with each record, as a journal with O_DIRECT would have to).

    .venv/bin/python bench/probe_durable_write.py [--dir DIR] [--writes 4000] [--size 1100] [--rounds 2]

``--dir`` defaults to a temporary directory under the current one (run it from the disk to
measure). Rounds alternate the modes so each sees the same load.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import tempfile
import time

CHUNK = 16 << 20  # journal_pre_alloc_size_mb's default
BLOCK = 4096
MODES = ("fallocate", "zeros", "sparse", "direct")


def prepare(path: str, mode: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if mode == "fallocate":
            os.posix_fallocate(fd, 0, CHUNK)
        elif mode in ("zeros", "direct"):
            zeros = bytes(1 << 20)
            for off in range(0, CHUNK, len(zeros)):
                os.pwrite(fd, zeros, off)
        os.fsync(fd)
    finally:
        os.close(fd)


def one_round(directory: str, mode: str, writes: int, size: int) -> dict[str, float]:
    path = os.path.join(directory, f"probe-{mode}")
    prepare(path, mode)
    direct = mode == "direct"
    fd = os.open(path, os.O_WRONLY | (os.O_DIRECT if direct else 0))
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    buf.write(b"r" * BLOCK)
    record = memoryview(buf)[:BLOCK if direct else size]
    per_block = max(BLOCK // size, 1)
    try:
        r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
        for i in range(writes):
            pos = (i // per_block) * BLOCK if direct else i * size
            os.pwritev(fd, [record], pos, os.RWF_DSYNC)
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_THREAD)
    finally:
        os.close(fd)
        os.unlink(path)
    return {"cpu_us": (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / writes * 1e6,
            "system_us": (r1.ru_stime - r0.ru_stime) / writes * 1e6,
            "sleeps": (r1.ru_nvcsw - r0.ru_nvcsw) / writes, "wall_us": (t1 - t0) / writes * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", help="where to write (default: a temporary directory under the current one)")
    ap.add_argument("--writes", type=int, default=4000)
    ap.add_argument("--size", type=int, default=1100, help="bytes per durable write (a 1 KiB message's record)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-durable-", dir=args.dir or ".") as directory:
        rows: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        for rnd in range(args.rounds):
            for mode in MODES:
                r = one_round(directory, mode, args.writes, args.size)
                rows[mode].append(r)
                print(f"round {rnd} {mode:9s}: CPU {r['cpu_us']:5.1f} us/write (system {r['system_us']:5.1f}), "
                      f"{r['sleeps']:.2f} sleeps/write, wall {r['wall_us']:6.1f} us", flush=True)
        for mode, rs in rows.items():
            med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            print(f"median {mode:9s}: CPU {med['cpu_us']:5.1f} us/write (system {med['system_us']:5.1f}), "
                  f"{med['sleeps']:.2f} sleeps/write, wall {med['wall_us']:6.1f} us")


if __name__ == "__main__":
    main()
