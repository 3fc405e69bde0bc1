"""Garbage collection and compaction of entry logs (bookie.garbage_collector, compactor)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from bookie import entry_log_format as elf
from bookie.entry_log_metadata import EntryLogMetadata, EntryLogMetadataMap, read_metadata
from bookie.entry_logger import list_log_ids
from bookie.errors import NoLedgerError
from bookie.garbage_collector import GarbageCollector
from bookie.ledger_storage import LedgerStorage
from bookie.metrics import BookieMetrics
from metadata import open_store
from metadata.ledger_ids import ledger_path
from tests.bookie.gc_workload import (
    check_entries,
    gc_config,
    leftovers,
    log_bytes,
    no_read_cache,
    referenced_logs,
    write_interleaved,
)

LEDGERS = list(range(1, 9))


async def _store(ledgers: list[int]):
    store = await open_store(f"memory://gc-{uuid.uuid4().hex}")
    for lid in ledgers:
        await store.create(ledger_path(lid), b"meta", make_parents=True)
    return store


def _open(cfg) -> LedgerStorage:
    storage = LedgerStorage(cfg, BookieMetrics())
    storage.open()
    no_read_cache(storage)
    return storage


def _close(storage: LedgerStorage, gc: GarbageCollector | None = None) -> None:
    if gc is not None:
        gc.close()
    storage.close()


async def _filled(tmp_path: Path, rounds: int = 6, **cfg_overrides):
    cfg = gc_config(tmp_path, **cfg_overrides)
    storage = _open(cfg)
    expected: dict[tuple[int, int], bytes] = {}
    await write_interleaved(storage, LEDGERS, rounds, 8, random.Random(1), expected)
    await storage.checkpoint(None)  # second checkpoint: the logs rotated by the first are indexed
    return cfg, storage, expected


def _rotated(storage: LedgerStorage):
    """(current dir, entry logger, ids of the rotated and indexed logs)."""
    cur = storage.dirs[0].current
    logger = storage.dirs[0].entry_logger
    return cur, logger, [i for i in list_log_ids(cur) if i not in logger.unindexed_ids()]


def _gauge(storage: LedgerStorage, name: str, **labels: str) -> float:
    value = storage.metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def test_gc_deletes_dead_ledgers_then_logs_and_compacts_the_rest(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path)
    cur = storage.dirs[0].current
    logs_before = list_log_ids(cur)
    assert len(logs_before) >= 6
    live = [l for l in LEDGERS if l % 2]
    store = await _store(live)
    gc = GarbageCollector(cfg, storage, 0, store, storage.metrics)
    # a first run without compaction: only the metadata is extracted, nothing is live-deleted
    await gc.run_once()
    assert all(storage.is_deleted(l) for l in LEDGERS if l % 2 == 0)
    assert not any(storage.is_deleted(l) for l in live)
    assert all(storage.dirs[0].locations.last_entry(l) == -1 for l in LEDGERS if l % 2 == 0)
    survivors = {k: v for k, v in expected.items() if k[0] % 2}
    await check_entries(storage, survivors)
    before = log_bytes(cur)
    await gc.run_once(force=True, force_major=True)
    after = log_bytes(cur)
    live_bytes = sum(len(v) + elf.RECORD_HEADER_SIZE for v in survivors.values())
    assert after < before
    assert after <= 1.3 * live_bytes + 8 * elf.HEADER_SIZE  # headers and maps of the few logs left
    assert gc.status.major_compaction_counter == 1
    await check_entries(storage, survivors)
    for lid in LEDGERS:
        if lid % 2 == 0:
            with pytest.raises(NoLedgerError):
                await storage.read_entry(lid, 0)
    # every log but the current one is referenced by the index (no orphan)
    current = storage.dirs[0].entry_logger.log_id
    assert set(list_log_ids(cur)) - {current} <= referenced_logs(storage)
    assert _gauge(storage, "bookie_gc_deleted_ledgers_total") == 4
    assert _gauge(storage, "bookie_gc_reclaimed_bytes_total", by="compaction") > 0
    known = {i: m.ledgers for i, m in gc.metas.items()}
    _close(storage, gc)
    # reopened: same bytes, tombstones kept, metadata loaded from RocksDB (no rescan needed)
    storage = _open(cfg)
    await check_entries(storage, survivors)
    assert all(storage.is_deleted(l) for l in LEDGERS if l % 2 == 0)
    gc = GarbageCollector(cfg, storage, 0, store, storage.metrics)
    gc.open()
    assert {i: m.ledgers for i, m in gc.metas.items()} == known and known
    _close(storage, gc)
    await store.close()


async def test_all_dead_logs_deleted_without_compaction(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, major_compaction_threshold=0.0, minor_compaction_threshold=0.0)
    cur = storage.dirs[0].current
    # ledgers 1-8 interleaved; then ledger 20 alone fills fresh logs
    await write_interleaved(storage, [20], 4, 40, random.Random(2), expected)
    await storage.checkpoint(None)
    n_before = len(list_log_ids(cur))
    for lid in LEDGERS:
        storage.mark_deleted(lid)
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once(force=True)
    remaining = list_log_ids(cur)
    assert len(remaining) < n_before
    assert _gauge(storage, "bookie_gc_deleted_entry_logs_total") == n_before - len(remaining)
    await check_entries(storage, {k: v for k, v in expected.items() if k[0] == 20})
    _close(storage, gc)


def _strip_map(path: Path, zero_only: bool) -> None:
    """Zero the header's map fields (and, unless zero_only, cut the map off the file)."""
    with open(path, "r+b") as f:
        header = elf.decode_header(f.read(elf.HEADER_SIZE))
        if not zero_only:
            f.truncate(header.ledgers_map_offset)
        f.seek(0)
        f.write(elf.encode_header(elf.LogHeader(header.log_id)))


@pytest.mark.parametrize("zero_only", [True, False])
async def test_zeroed_or_missing_ledgers_map_is_scanned_not_deleted(tmp_path: Path, zero_only: bool) -> None:
    cfg, storage, expected = await _filled(tmp_path)
    cur = storage.dirs[0].current
    rotated = [i for i in list_log_ids(cur) if i not in storage.dirs[0].entry_logger.unindexed_ids()]
    victim = rotated[len(rotated) // 2]
    meta, from_map = read_metadata(cur / elf.file_name(victim), victim)
    assert from_map
    _strip_map(cur / elf.file_name(victim), zero_only)
    scanned, from_map = read_metadata(cur / elf.file_name(victim), victim)
    assert not from_map and scanned.ledgers == meta.ledgers and not scanned.corrupt
    # keep exactly one ledger of the victim log alive
    keep = min(meta.ledgers)
    for lid in LEDGERS:
        if lid != keep:
            storage.mark_deleted(lid)
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once()  # no compaction: deletion only
    assert (cur / elf.file_name(victim)).exists()
    await check_entries(storage, {k: v for k, v in expected.items() if k[0] == keep})
    _close(storage, gc)


@pytest.mark.parametrize("where", ["middle", "tail"])
async def test_corrupt_log_is_kept_while_the_index_points_into_it(tmp_path: Path, where: str) -> None:
    cfg, storage, expected = await _filled(tmp_path)
    cur, logger, rotated = _rotated(storage)
    bad = rotated[1]
    path = cur / elf.file_name(bad)
    _strip_map(path, zero_only=False)  # scanned ...
    if where == "middle":
        with open(path, "r+b") as f:  # ... and a record in the middle is garbage (bit rot)
            f.seek(os.path.getsize(path) // 2)
            f.write(b"\xff" * 64)
    else:
        with open(path, "ab") as f:  # ... and random bytes follow the last record (a crash)
            f.write(random.Random(3).randbytes(300))
    in_bad = {lid for lid, loc_log in _indexed_logs(storage).items() if bad in loc_log}
    keep = min(in_bad)
    for lid in LEDGERS:
        if lid != keep:
            storage.mark_deleted(lid)  # every other log is dead and goes
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once(force=True)
    left = set(list_log_ids(cur)) - logger.unindexed_ids()
    assert bad in left and bad in gc.corrupt
    assert _gauge(storage, "bookie_gc_corrupt_entry_logs") == 1
    # the next run does not trip over it either, and the live ledger's entries in it still read
    await gc.run_once(force=True)
    assert gc.failed_runs == 0 and path.exists()
    if where == "tail":
        await check_entries(storage, {k: v for k, v in expected.items() if k[0] == keep})
    # once no live ledger has an entry in it, the corrupt log is given back too
    storage.mark_deleted(keep)
    await storage.checkpoint(None)
    await gc.run_once(force=True)
    assert not path.exists() and bad not in gc.corrupt
    assert _gauge(storage, "bookie_gc_corrupt_entry_logs") == 0
    assert _gauge(storage, "bookie_gc_reclaimed_bytes_total", by="corrupt") > 0
    assert gc.failed_runs == 0
    _close(storage, gc)


def _indexed_logs(storage: LedgerStorage) -> dict[int, set[int]]:
    """ledger -> the entry logs the index points into for it."""
    out: dict[int, set[int]] = {}
    for lid in LEDGERS:
        out[lid] = {loc.log_id for _, loc in storage.dirs[0].locations.entries(lid)}
    return out


async def test_compaction_of_a_corrupt_log_is_skipped_others_compacted(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path)
    cur, logger, rotated = _rotated(storage)
    bad = rotated[2]
    path = cur / elf.file_name(bad)
    header = elf.decode_header(path.read_bytes()[: elf.HEADER_SIZE])
    with open(path, "r+b") as f:  # map intact, a record before it broken
        f.seek(header.ledgers_map_offset - 200)
        f.write(b"\x00\x01" * 50)
    for lid in LEDGERS:
        if lid % 2 == 0:
            storage.mark_deleted(lid)
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once(force=True, force_major=True)
    assert bad in gc.corrupt and path.exists()
    assert gc.status.major_compaction_counter == 1
    assert _gauge(storage, "bookie_gc_compacted_entry_logs_total") >= len(rotated) - 2
    _close(storage, gc)


class _HookStore:
    """Delegates to a store; runs ``hook`` right after the leaf directory of ledgers 0-9999
    was listed, so what the hook creates is missing from this listing."""

    def __init__(self, store, hook) -> None:
        self._store, self._hook = store, hook

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def children(self, path, watch=None):
        names = await self._store.children(path)
        if self._hook is not None and path.endswith("/00/0000"):
            hook, self._hook = self._hook, None
            await hook()
        return names


async def test_ledger_created_during_gc_is_not_collected(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, rounds=2)
    real = await _store(LEDGERS)
    storage.create_ledger(50, b"k")  # local, never in the metadata store: collected

    async def create_ledger_now() -> None:
        # A client creates ledger 99 (metadata first, then its first add reaches the bookie).
        await real.create(ledger_path(99), b"meta", make_parents=True)
        storage.create_ledger(99, b"k")
        await real.create(ledger_path(100), b"meta", make_parents=True)

    gc = GarbageCollector(cfg, storage, 0, _HookStore(real, create_ledger_now), storage.metrics)  # type: ignore[arg-type]
    deleted = await gc.gc_ledgers()
    assert deleted == [50]
    assert storage.state(99) is not None and not storage.is_deleted(99)
    # and the next run sees 99 in the store
    assert await gc.gc_ledgers() == []
    _close(storage, gc)
    await real.close()


async def test_tombstone_survives_restart_and_refuses_the_ledger(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, rounds=1)
    store = await _store([1, 2, 3])
    gc = GarbageCollector(cfg, storage, 0, store, storage.metrics)
    await gc.gc_ledgers()
    _close(storage, gc)  # no checkpoint after GC: the tombstone was persisted by GC itself
    storage = _open(cfg)
    assert storage.is_deleted(5) and storage.state(5) is None
    with pytest.raises(NoLedgerError):
        storage.create_ledger(5, b"k")  # a late add or journal replay cannot recreate it
    with pytest.raises(NoLedgerError):
        await storage.read_entry(5, 0)
    _close(storage)
    await store.close()


async def test_reads_never_fail_during_compaction(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, compaction_rate_by_entries=400)
    for lid in LEDGERS:
        if lid % 2 == 0:
            storage.mark_deleted(lid)
    await storage.checkpoint(None)
    survivors = sorted((k, v) for k, v in expected.items() if k[0] % 2)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    reads = 0
    compacting = True

    async def reader() -> None:
        nonlocal reads
        rng = random.Random(3)
        while compacting:
            (lid, eid), data = rng.choice(survivors)
            assert await storage.read_entry(lid, eid) == data
            reads += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        nursery.start_soon(reader)
        await gc.run_once(force=True, force_major=True)
        compacting = False
    assert gc.status.major_compaction_counter == 1 and _gauge(storage, "bookie_gc_compacted_entry_logs_total") > 0
    assert reads > 50
    # a location looked up before compaction moved the entry: the read retries the new one
    await check_entries(storage, dict(survivors))
    _close(storage, gc)


def test_entry_log_metadata_codec_and_map(tmp_path: Path) -> None:
    meta = EntryLogMetadata(7, {1: 100, 2**62: 5}, 300)
    back = EntryLogMetadata.decode(meta.encode())
    assert back == meta and back.remaining_size == 105 and abs(back.usage - 0.35) < 1e-9
    m = EntryLogMetadataMap(tmp_path / "meta")
    m.put(meta)
    m.put(EntryLogMetadata(8, {}, 0))
    m.delete(8)
    assert m.load_all() == {7: meta}
    m.close()


async def _kill_after_start(cmd: list[str], delay: float) -> int:
    """Run the child, SIGKILL it ``delay`` s after it said its GC starts; its exit status."""
    env = dict(os.environ, QUIRE_TEST_COMPACTION_KILL="")
    proc = await trio.lowlevel.open_process(cmd, env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with trio.fail_after(60):
        seen = b""
        while b"gc\n" not in seen:
            chunk = await proc.stdout.receive_some()
            if not chunk:
                break
            seen += chunk
        await trio.sleep(delay)
        if proc.returncode is None:
            proc.kill()
        return await proc.wait()


SIGKILL_CYCLES = int(os.environ.get("QUIRE_GC_KILL_CYCLES", "20"))
_POINTS = ["copy", "copied", "renamed", "indexed", "old_deleted", "done", ""]


async def test_sigkill_during_compaction_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(12)
    cfg = gc_config(tmp_path)
    expected: dict[tuple[int, int], bytes] = {}
    deleted: set[int] = set()
    next_lid = 1
    live: list[int] = []
    killed = 0
    for cycle in range(SIGKILL_CYCLES):
        storage = _open(cfg)
        new = list(range(next_lid, next_lid + 3))
        next_lid += 3
        live += new
        await write_interleaved(storage, live, 2, 3, rng, expected)
        await storage.checkpoint(None)
        for lid in rng.sample(live, k=min(len(live) // 2, 3)):
            storage.mark_deleted(lid)
            live.remove(lid)
            deleted.add(lid)
            for key in [k for k in expected if k[0] == lid]:
                del expected[key]
        await storage.checkpoint(None)
        _close(storage)
        cmd = [sys.executable, "-m", "tests.bookie.gc_kill_child", str(tmp_path)]
        if cycle % 2 == 0:  # at a named step of the compaction protocol
            point = rng.choice(_POINTS)
            env = dict(os.environ, QUIRE_TEST_COMPACTION_KILL=f"{point}:{rng.randint(1, 3)}" if point else "")
            returncode = (await trio.run_process(cmd, env=env, check=False)).returncode
        else:  # from outside, at any moment of the run
            returncode = await _kill_after_start(cmd, rng.uniform(0, 0.08))
        assert returncode in (0, -9), returncode
        killed += returncode == -9
        # recovery at open, then every surviving entry, no resurrection, no leftover
        storage = _open(cfg)
        cur = storage.dirs[0].current
        assert leftovers(cur) == []
        await check_entries(storage, expected)
        for lid in deleted:
            assert storage.is_deleted(lid)
            assert storage.dirs[0].locations.last_entry(lid) == -1
        gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
        await gc.run_once(force=True, force_major=True)
        current = storage.dirs[0].entry_logger.log_id
        unreferenced = set(list_log_ids(cur)) - {current} - referenced_logs(storage)
        assert unreferenced == set(), f"cycle {cycle}: orphan logs {unreferenced}"
        await check_entries(storage, expected)
        _close(storage, gc)
    assert killed >= SIGKILL_CYCLES // 3


async def test_disk_pressure_suspends_compaction(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, rounds=1, disk_usage_threshold=0.95, disk_usage_lwm_threshold=0.9)
    used = {"f": 0.5}
    storage.disk_usage = lambda: (int((1 - used["f"]) * 1000), 1000)  # type: ignore[method-assign]
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    assert gc._allowed(False) == (True, True)
    used["f"] = 0.92  # over disk_usage_warn_threshold 0.90: major suspended
    assert gc._allowed(False) == (False, True)
    used["f"] = 0.96  # over disk_usage_threshold 0.95: both
    assert gc._allowed(False) == (False, False)
    assert gc._allowed(True) == (True, True)  # a forced run (PUT /gc) still compacts
    gc.suspend_minor = True
    assert gc._allowed(True) == (True, False)
    gc.config.is_force_gc_allow_when_no_space = True
    gc.suspend_minor = False
    assert gc._allowed(False) == (True, True)
    _close(storage, gc)


async def test_shell_lists_entry_logs_and_rebuilds_the_index(tmp_path: Path) -> None:
    import json
    import shutil

    from click.testing import CliRunner

    from bookie.cli import bookie_shell

    cfg, storage, expected = await _filled(tmp_path)
    for lid in LEDGERS:
        if lid % 2 == 0:
            storage.mark_deleted(lid)
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once(force=True, force_major=True)  # some logs are compacted copies now
    _close(storage, gc)
    dirs = cfg.ledger_directories[0]
    out = CliRunner().invoke(bookie_shell, ["list-entry-logs", "--ledger-dirs", dirs])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.output.splitlines()]
    assert rows and all("age_s" in r and "size" in r for r in rows)
    assert any(r.get("ledgers") and not r["dead_ledgers"] and r["usage"] == 1.0 for r in rows)
    cur = Path(dirs) / "current"
    shutil.rmtree(cur / "locations")  # the index is lost
    (cur / "locations").mkdir()
    out = CliRunner().invoke(bookie_shell, ["rebuild-index", "--ledger-dirs", dirs])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["entries"] >= len([k for k in expected if k[0] % 2])
    storage = _open(cfg)
    await check_entries(storage, {k: v for k, v in expected.items() if k[0] % 2})
    assert all(storage.dirs[0].locations.last_entry(l) == -1 for l in LEDGERS if l % 2 == 0)
    _close(storage)


async def test_tombstone_not_overwritten_by_a_concurrent_checkpoint(tmp_path: Path) -> None:
    import threading

    cfg, storage, expected = await _filled(tmp_path, rounds=1)
    storage.set_fenced(3)  # ledger 3's live state is dirty: the next checkpoint copies it
    gate = threading.Event()
    real = storage._flush_half

    def slow_flush(half, dirty) -> None:  # type: ignore[no-untyped-def]
        gate.wait(10)
        real(half, dirty)

    storage._flush_half = slow_flush  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(storage.checkpoint, None)
        await trio.sleep(0.1)  # the checkpoint holds its copy of ledger 3's state
        nursery.start_soon(storage.tombstone, [3])
        await trio.sleep(0.1)
        gate.set()
    storage._flush_half = real  # type: ignore[method-assign]
    _close(storage)  # a crash would lose nothing more: no checkpoint after the tombstone
    storage = _open(cfg)
    assert storage.is_deleted(3)
    _close(storage)


async def test_stop_aborts_a_throttled_compaction(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, compaction_rate_by_entries=5)  # would take minutes
    for lid in LEDGERS:
        if lid % 2 == 0:
            storage.mark_deleted(lid)
    await storage.checkpoint(None)
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    logs_before = set(list_log_ids(storage.dirs[0].current))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gc.run_once, True, True, False)
            await trio.sleep(0.5)
            gc.stop()
    cur = storage.dirs[0].current
    assert leftovers(cur) == [] and _gauge(storage, "bookie_gc_compacted_entry_logs_total") == 0
    assert set(list_log_ids(cur)) <= logs_before
    await check_entries(storage, {k: v for k, v in expected.items() if k[0] % 2})
    _close(storage, gc)


async def test_two_ledger_dirs(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(
        tmp_path, ledger_directories=[str(tmp_path / "l1"), str(tmp_path / "l2")]
    )
    store = await _store([1, 2, 5, 6])
    gcs = [GarbageCollector(cfg, storage, i, store, storage.metrics) for i in range(2)]
    for gc in gcs:
        await gc.run_once(force=True, force_major=True)
    assert sorted(l for l in LEDGERS if storage.is_deleted(l)) == [3, 4, 7, 8]
    await check_entries(storage, {k: v for k, v in expected.items() if k[0] in (1, 2, 5, 6)})
    for gc in gcs:
        gc.close()
    storage.close()
    await store.close()


def test_index_update_moves_only_entries_still_in_the_old_log(tmp_path: Path) -> None:
    from bookie import compactor
    from bookie.entry_log_format import Location
    from bookie.ledger_index import EntryLocationIndex

    index = EntryLocationIndex(tmp_path / "locations")
    index.put_batch([(1, 0, Location(3, 1024, 50)), (1, 1, Location(5, 2048, 50))])  # 1:1 rewritten since
    moved = [(1, 0, elf.LOCATION.pack(9, 1024, 50)), (1, 1, elf.LOCATION.pack(9, 1074, 50)),
             (2, 0, elf.LOCATION.pack(9, 1124, 50))]  # ledger 2 deleted meanwhile: no key
    assert compactor.update_index(index, 3, moved) == 1
    assert index.get(1, 0) == Location(9, 1024, 50)
    assert index.get(1, 1) == Location(5, 2048, 50)
    assert index.get(2, 0) is None
    index.close()


async def test_failed_log_delete_is_retried_next_run(tmp_path: Path) -> None:
    cfg, storage, expected = await _filled(tmp_path, major_compaction_threshold=0.0, minor_compaction_threshold=0.0)
    for lid in LEDGERS:
        storage.mark_deleted(lid)
    await storage.checkpoint(None)
    cur, logger, rotated = _rotated(storage)
    real = logger.retire_log
    calls = []

    def failing(log_id: int) -> None:
        calls.append(log_id)
        raise OSError(5, "Input/output error")

    logger.retire_log = failing  # type: ignore[method-assign]
    gc = GarbageCollector(cfg, storage, 0, None, storage.metrics)
    await gc.run_once()
    assert calls and set(rotated) <= set(list_log_ids(cur))
    assert _gauge(storage, "bookie_gc_failed_deletes_total") == len(calls)
    assert set(gc.metas) >= set(rotated)  # metadata kept: no rescan needed
    logger.retire_log = real  # type: ignore[method-assign]
    await gc.run_once()
    assert not set(rotated) & set(list_log_ids(cur))
    _close(storage, gc)
