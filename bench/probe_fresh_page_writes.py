"""Kernel CPU of buffered file writes into fresh pages vs into pages the cache just gave back.

Writes 400 MiB in 4 MiB pwritev calls to a new file in ``--dir`` three ways and prints system
CPU per MiB: ``keep`` (fdatasync every 16 MiB, the pages stay cached: the cache grows with pages
never touched before), ``lag`` (fdatasync every 32 MiB, then drop what is more than 64 MiB
behind: entry_log_remove_pages_from_cache) and ``drop`` (fdatasync and drop everything every
16 MiB). On this VM ``keep`` cost 1.2-2.4 ms of system CPU per MiB, ``lag``/``drop`` 0.26-0.35
(bench/results/win17g.md): a page the guest touches for the first time since it was freed is
slow to fill. Modes run in turn with a pause between (a freed page turns cold again)::

    .venv/bin/python bench/probe_fresh_page_writes.py --dir /tmp
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

MIB = 1 << 20


def run(mode: str, directory: str, total_mib: int) -> float:
    chunk = [os.urandom(128 * 1024) for _ in range(32)]  # 4 MiB in 32 pieces
    fd, path = tempfile.mkstemp(dir=directory, prefix=f"probe-{mode}-")
    pos = 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    try:
        for i in range(total_mib // 4):
            os.pwritev(fd, chunk, pos)
            pos += 4 * MIB
            if mode == "drop" and i % 4 == 3:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, pos, os.POSIX_FADV_DONTNEED)
            elif mode == "lag" and i % 8 == 7:
                os.fdatasync(fd)
                if pos > 64 * MIB:
                    os.posix_fadvise(fd, 0, pos - 64 * MIB, os.POSIX_FADV_DONTNEED)
            elif mode == "keep" and i % 4 == 3:
                os.fdatasync(fd)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        os.close(fd)
        os.unlink(path)
    return (r1.ru_stime - r0.ru_stime) * 1000 / total_mib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--mib", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    for _ in range(args.rounds):
        for mode in ("keep", "lag", "drop"):
            print(f"{mode:>4}: {run(mode, args.dir, args.mib):.3f} ms system CPU per MiB", flush=True)
            time.sleep(3)


if __name__ == "__main__":
    main()
