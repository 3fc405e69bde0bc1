"""Shared by the GC tests and their SIGKILL child: configs, interleaved writes, checks."""

from __future__ import annotations

import os
import random
from pathlib import Path

from bookie import compactor
from bookie import entry_log_format as elf
from bookie.config import BookieConfig
from bookie.entry_logger import list_log_ids
from bookie.ledger_storage import LedgerStorage
from bookie.read_cache import ReadCache
from tests.bookie.helpers import entry, make_config

LOG_SIZE = 64 * 1024


def gc_config(root: Path, **overrides: object) -> BookieConfig:
    values: dict[str, object] = dict(
        log_size_limit=LOG_SIZE,
        compaction_rate_by_entries=0,  # unthrottled
        gc_wait_time_ms=1000,
        journal_directory=str(root / "journal"),
        ledger_directories=[str(root / "ledgers")],
    )
    values.update(overrides)
    return make_config(root, **values)


def no_read_cache(storage: LedgerStorage) -> None:
    """Every read goes to the entry logs (what compaction moves)."""
    storage.read_cache = ReadCache(0)
    storage._read_ahead_bytes = 0


async def write_interleaved(
    storage: LedgerStorage, ledgers: list[int], rounds: int, per_round: int, rng: random.Random,
    expected: dict[tuple[int, int], bytes],
) -> None:
    """Each round adds ``per_round`` entries to every ledger, then checkpoints: every entry
    log ends up holding several ledgers."""
    for _ in range(rounds):
        for lid in ledgers:
            if storage.states.get(lid) is None:
                storage.create_ledger(lid, b"k")
            for _ in range(per_round):
                eid = 1 + max((e for (l, e) in expected if l == lid), default=-1)
                data = entry(lid, eid, rng.randbytes(rng.randint(100, 1500)))
                assert storage.try_add(lid, eid, data, eid - 1)
                expected[(lid, eid)] = data
        await storage.checkpoint(None)


async def check_entries(storage: LedgerStorage, expected: dict[tuple[int, int], bytes]) -> None:
    for (lid, eid), data in sorted(expected.items()):
        got = await storage.read_entry(lid, eid)
        assert got == data, f"entry {lid}:{eid} differs"


def log_bytes(current: Path) -> int:
    """Bytes in the entry logs; a log GC deletes between the listing and its size counts 0
    (this runs in the bookie's disk-checker thread while compaction works)."""
    total = 0
    for i in list_log_ids(current):
        try:
            total += os.path.getsize(current / elf.file_name(i))
        except FileNotFoundError:
            pass
    return total


def referenced_logs(storage: LedgerStorage) -> set[int]:
    """Log ids the location index points into."""
    return set(storage.dirs[0].locations.bytes_by_log())


def leftovers(current: Path) -> list[str]:
    return [n for n in os.listdir(current) if n.endswith(compactor.COMPACTING_SUFFIX) or n.endswith(".compacted")]
