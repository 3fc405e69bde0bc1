"""Offline tools over a stopped bookie's ledger dir: an entry-log report and a rebuild of the
location index from the entry logs (``quire bookie-shell list-entry-logs / rebuild-index``).

The rebuild scans every entry log in id order and indexes each record of a ledger that has
no tombstone; a later log wins, which is right because a compacted copy always gets a higher
id than the log it replaced. The old index is kept next to the new one, renamed.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from bookie import compactor
from bookie import entry_log_format as elf
from bookie.entry_log_metadata import ScanResult, iter_records, read_metadata
from bookie.entry_logger import list_log_ids
from bookie.errors import FormatError
from bookie.ledger_index import EntryLocationIndex, LedgerMetadataIndex

_BATCH = 10_000


def _dead_ledgers(cur: Path) -> set[int]:
    states = LedgerMetadataIndex(cur / "ledgers", read_only=True)  # a running bookie holds it open
    try:
        return {lid for lid, st in states.load_all().items() if st.deleted}
    finally:
        states.close()


def entry_log_report(cur: Path) -> list[dict[str, object]]:
    """One row per entry log: size, age, ledgers (live ones marked), usage, corruption."""
    dead = _dead_ledgers(cur)
    now = time.time()
    rows: list[dict[str, object]] = []
    for log_id in list_log_ids(cur):
        path = cur / elf.file_name(log_id)
        st = os.stat(path)
        row: dict[str, object] = {"log": f"{log_id:x}", "size": st.st_size, "age_s": round(now - st.st_mtime, 1)}
        try:
            meta, from_map = read_metadata(path, log_id) if st.st_size > elf.HEADER_SIZE else (None, False)
        except (OSError, FormatError) as exc:
            row["corrupt"] = str(exc)
            rows.append(row)
            continue
        if meta is not None:
            live = {lid: b for lid, b in meta.ledgers.items() if lid not in dead}
            row.update(
                ledgers=sorted(meta.ledgers), dead_ledgers=sorted(set(meta.ledgers) - set(live)),
                usage=round(sum(live.values()) / meta.total_size, 4) if meta.total_size else 0.0,
                from_map=from_map, corrupt=meta.corrupt,
            )
        rows.append(row)
    return rows


def rebuild_location_index(cur: Path) -> dict[str, int]:
    """Rebuild ``cur/locations`` from the entry logs; returns counts."""
    old = EntryLocationIndex(cur / "locations")
    try:
        compactor.recover(cur, old)  # finish an interrupted compaction first
    finally:
        old.close()
    dead = _dead_ledgers(cur)
    backup = cur / f"locations.bak-{int(time.time())}"
    shutil.move(str(cur / "locations"), backup)
    index = EntryLocationIndex(cur / "locations")
    counts = {"logs": 0, "entries": 0, "corrupt_logs": 0}
    try:
        for log_id in list_log_ids(cur):
            path = cur / elf.file_name(log_id)
            if os.path.getsize(path) <= elf.HEADER_SIZE:
                continue
            batch: list[tuple[int, int, None]] = []
            values: list[bytes] = []
            scan = ScanResult()
            try:
                for rec in iter_records(path, scan):
                    if rec.ledger_id == elf.LEDGERS_MAP_ID or rec.ledger_id in dead:
                        continue
                    batch.append((rec.ledger_id, rec.entry_id, None))
                    values.append(elf.LOCATION.pack(log_id, rec.offset, rec.length))
                    if len(batch) >= _BATCH:
                        index.put_encoded(batch, values)
                        counts["entries"] += len(batch)
                        batch, values = [], []
            except (OSError, FormatError):
                scan.corrupt = scan.corrupt or "unreadable"
            if batch:
                index.put_encoded(batch, values)
                counts["entries"] += len(batch)
            counts["logs"] += 1
            counts["corrupt_logs"] += bool(scan.corrupt)
    finally:
        index.close()
    return counts
