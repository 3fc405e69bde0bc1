"""Child process of the SIGKILL test: open the storage (recovery), run one forced GC with
major compaction; QUIRE_TEST_COMPACTION_KILL makes it SIGKILL itself at a compaction step,
or the parent kills it at a random moment after it printed "gc"."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from bookie.garbage_collector import GarbageCollector
from bookie.ledger_storage import LedgerStorage
from bookie.metrics import BookieMetrics
from tests.bookie.gc_workload import gc_config


async def main(root: Path) -> None:
    cfg = gc_config(root)
    storage = LedgerStorage(cfg, BookieMetrics())
    storage.open()
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    print("gc", flush=True)  # the parent may SIGKILL us at any moment from here on
    await gc.run_once(force=True, force_major=True)
    gc.close()
    storage.close()


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]))
