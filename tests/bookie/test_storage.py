"""Storage tests: entry logs + ledgers map, write cache swap/throttling, read cache, indexes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bookie import entry_log_format as elf
from bookie.entry_logger import EntryLogger, list_log_ids
from bookie.errors import BookieIOError, DigestMismatchError, NoEntryError, NoLedgerError, TooManyRequestsError
from bookie.ledger_index import EntryLocationIndex, LedgerMetadataIndex, LedgerState
from bookie.ledger_storage import LedgerStorage
from bookie.metrics import BookieMetrics
from bookie.read_cache import ReadCache
from bookie.write_cache import WriteCache
from tests.bookie.helpers import entry, make_config


def test_entry_log_rotation_writes_ledgers_map(tmp_path: Path) -> None:
    logger = EntryLogger(tmp_path, log_size_limit=64 * 1024)
    logger.open()
    items = [(l, e, b"%d:%d:" % (l, e) + bytes(3000)) for e in range(20) for l in (1, 2, 3)]
    locs = [elf.decode_location(v) for v in logger.add_entries(items)]
    logger.flush()
    ids = list_log_ids(tmp_path)
    assert len(ids) >= 2
    for (l, e, data), loc in zip(items, locs):
        assert logger.read(loc, l, e) == data
    # a rotated log has its header patched with the ledgers map
    first = (tmp_path / elf.file_name(ids[0])).read_bytes()
    hdr = elf.decode_header(first)
    assert hdr.ledgers_count == 3 and hdr.ledgers_map_offset > elf.HEADER_SIZE
    lmap = elf.decode_ledgers_map(first, hdr.ledgers_map_offset, hdr.ledgers_count)
    scanned: dict[int, int] = {}
    for rec in elf.scan(first):
        if rec.ledger_id != elf.LEDGERS_MAP_ID:
            scanned[rec.ledger_id] = scanned.get(rec.ledger_id, 0) + rec.length
    assert lmap == scanned
    # a wrong location is an IO error, never "no entry"
    with pytest.raises(BookieIOError):
        logger.read(elf.Location(ids[0], elf.HEADER_SIZE + 1, locs[0].length), 1, 0)
    with pytest.raises(BookieIOError):
        logger.read(locs[0], 1, 99)
    logger.close()
    # the next open starts a new log after the highest id
    again = EntryLogger(tmp_path, 64 * 1024)
    again.open()
    assert again.log_id == max(ids) + 1
    again.close()


def test_entry_log_runs_read_into_reused_buffers_keep_views_held(tmp_path: Path) -> None:
    """Large run reads go into pooled buffers: entries still viewed keep their bytes while later
    runs are read, a run whose views are gone lends its buffer to the next, and a torn record
    ends a run as before."""
    logger = EntryLogger(tmp_path, log_size_limit=64 << 20)
    logger.open()
    items = [(5, e, bytes([e % 251]) * 20_000 + b"%d" % e) for e in range(200)]
    locs = [elf.decode_location(v) for v in logger.add_entries(items)]
    logger.flush()
    held = logger.read_run(locs[0], 5, 0, 50, 4 << 20)
    assert [bytes(v) for v in held] == [d for _, _, d in items[:50]]
    buffers = set()
    for first in (50, 100, 150, 50):
        run = logger.read_run(locs[first], 5, first, 50, 4 << 20)
        assert [bytes(v) for v in run] == [d for _, _, d in items[first:first + 50]]
        buffers.add(id(run[1].obj))
        del run
    assert len(buffers) == 1  # each run's buffer served the next once its views were gone
    assert [bytes(v) for v in held] == [d for _, _, d in items[:50]]
    # a torn record in the middle ends the run before it
    with open(tmp_path / elf.file_name(locs[120].log_id), "r+b") as f:
        f.seek(locs[120].offset + locs[120].length - 1)
        f.write(b"\xff")
    run = logger.read_run(locs[100], 5, 100, 50, 4 << 20)
    assert [bytes(v) for v in run] == [d for _, _, d in items[100:120]]
    logger.close()


def test_entry_log_record_checksum() -> None:
    rec = bytearray(elf.encode_record(5, 6, b"hello"))
    assert elf.decode_record(bytes(rec))[:3] == (5, 6, b"hello")
    rec[-1] ^= 1
    with pytest.raises(DigestMismatchError):
        elf.decode_record(bytes(rec))


def test_write_cache_swap_and_full() -> None:
    wc = WriteCache(max_bytes=2000)  # halves of 1000 bytes
    assert wc.put(1, 0, b"a" * 600)
    assert not wc.put(1, 1, b"b" * 600)  # does not fit in the active half
    half = wc.swap()
    assert wc.get(1, 0) == b"a" * 600  # still readable while being flushed
    assert wc.put(1, 1, b"b" * 600)
    assert wc.last_entry(1) == 1
    assert not wc.put(1, 2, b"c" * 600)  # both halves full: caller throttles
    with pytest.raises(RuntimeError):
        wc.swap()
    assert [(l, e) for l, e, _ in half.sorted_entries()] == [(1, 0)]
    wc.flushed()
    assert wc.get(1, 0) is None
    assert wc.put(2, 0, b"x" * 5000) is False  # oversize only into an empty half
    wc.swap()
    wc.flushed()
    assert wc.put(2, 0, b"x" * 5000)


def test_read_cache_fifo_eviction() -> None:
    rc = ReadCache(max_bytes=300)
    for i in range(5):
        rc.put(1, i, bytes(100))
    assert rc.size <= 300 and len(rc) == 3
    assert rc.get(1, 0) is None and rc.get(1, 4) is not None


def test_indexes(tmp_path: Path) -> None:
    loc = EntryLocationIndex(tmp_path / "locations")
    loc.put_batch([(7, e, elf.Location(1, 1024 + e, 50)) for e in range(10)] + [(8, 0, elf.Location(1, 9, 9))])
    assert loc.get(7, 3) == elf.Location(1, 1027, 50)
    assert loc.get(7, 10) is None
    assert loc.last_entry(7) == 9 and loc.last_entry(6) == -1 and loc.last_entry(8) == 0
    assert [e for e, _ in loc.entries(7)] == list(range(10))
    loc.delete_ledger(7)
    assert loc.last_entry(7) == -1 and loc.last_entry(8) == 0
    loc.close()
    meta = LedgerMetadataIndex(tmp_path / "ledgers")
    meta.put_batch({3: LedgerState(fenced=True, master_key=b"k", lac=4), 4: LedgerState(deleted=True, exists=False)})
    meta.close()
    meta = LedgerMetadataIndex(tmp_path / "ledgers")
    states = meta.load_all()
    assert states[3].fenced and states[3].master_key == b"k" and states[3].lac == 4 and states[4].deleted
    meta.close()


async def test_storage_checkpoint_read_ahead_and_errors(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, ledger_directories=[str(tmp_path / "l1"), str(tmp_path / "l2")])
    storage = LedgerStorage(cfg, BookieMetrics())
    storage.open()
    for lid in (10, 11):
        storage.create_ledger(lid, b"k")
        for e in range(30):
            assert storage.try_add(lid, e, entry(lid, e, b"p%d" % e), e - 1)
    await storage.checkpoint(None)
    assert storage.write_cache.get(10, 0) is None
    assert await storage.read_entry(10, 5) == entry(10, 5, b"p5")
    # read-ahead pulled the following entries of ledger 10 into the read cache
    assert storage.read_cache.get(10, 6) == entry(10, 6, b"p6")
    assert storage.read_cache.get(11, 0) is None
    assert await storage.last_entry_id(11) == 29
    assert await storage.last_add_confirmed(11) == 28
    with pytest.raises(NoEntryError):
        await storage.read_entry(10, 30)
    with pytest.raises(NoLedgerError):
        await storage.read_entry(12, 0)
    storage.close()
    # a reopened storage finds everything through the index
    storage = LedgerStorage(cfg, BookieMetrics())
    storage.open()
    assert storage.state(11) is not None
    assert await storage.read_entry(11, 29) == entry(11, 29, b"p29")
    storage.close()


async def test_storage_throttles_then_rejects_when_cache_full(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, db_storage_write_cache_max_size_mb=1, db_storage_max_throttle_time_ms=200)
    storage = LedgerStorage(cfg, BookieMetrics())
    storage.open()
    storage.create_ledger(1, b"")
    big = bytes(400 * 1024)
    assert storage.try_add(1, 0, big, -1)
    requested: list[int] = []
    storage.request_flush = lambda: requested.append(1)
    assert not storage.try_add(1, 1, big, -1)
    assert requested  # a full cache asks for a checkpoint
    storage.write_cache.swap()  # a flush in progress that never finishes
    assert storage.try_add(1, 1, big, -1)
    with pytest.raises(TooManyRequestsError):
        await storage.add_entry(1, 2, big, -1)

    async def finish_flush() -> None:
        await trio.sleep(0.05)
        half = storage.write_cache.flushing
        assert half is not None
        storage.write_cache.flushed()
        await storage.checkpoint(None)  # the waiting add retries after a completed flush

    async with trio.open_nursery() as nursery:
        nursery.start_soon(finish_flush)
        await storage.add_entry(1, 2, big, -1)  # waits for room, then succeeds
    storage.close()


def test_write_all_at_many_buffers(tmp_path: Path) -> None:
    import os

    from bookie.file_io import write_all_at

    bufs = [bytes([i % 251]) * (i % 7 + 1) for i in range(5000)]  # more than IOV_MAX buffers
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)
    try:
        assert write_all_at(fd, bufs, 10) == sum(map(len, bufs))
        assert os.pread(fd, 1 << 20, 10) == b"".join(bufs)
    finally:
        os.close(fd)


def test_write_all_at_durable_one_call_and_fallback(tmp_path: Path) -> None:
    import os

    from bookie.file_io import write_all_at_durable

    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)
    try:
        small = [b"a" * 100, b"b" * 5000, b"c"]  # one pwritev with RWF_DSYNC
        assert write_all_at_durable(fd, small, 0) == 5101
        many = [bytes([i % 251]) * 3 for i in range(3000)]  # beyond IOV_MAX: write + fdatasync
        assert write_all_at_durable(fd, many, 5101) == 9000
        assert write_all_at_durable(fd, small, 14101, nbytes=5101) == 5101  # the caller's count
        assert os.pread(fd, 1 << 20, 0) == b"".join(small + many + small)
    finally:
        os.close(fd)


def _cached_pages(path: Path) -> list[bool]:
    """Which pages of ``path`` are in the page cache now (mincore over a shared read-only map)."""
    import ctypes
    import mmap as mmap_module

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = path.stat().st_size
    pages = (size + mmap_module.PAGESIZE - 1) // mmap_module.PAGESIZE
    with open(path, "rb") as f:
        addr = libc.mmap(None, size, mmap_module.PROT_READ, mmap_module.MAP_SHARED, f.fileno(), 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vec = ctypes.create_string_buffer(pages)
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
            return [bool(b & 1) for b in vec.raw[:pages]]
        finally:
            libc.munmap(addr, size)


def test_entry_log_drops_flushed_pages_behind_cache_keep(tmp_path: Path) -> None:
    """entry_log_remove_pages_from_cache: once a flush fsynced them, the pages more than
    cache_keep bytes behind the end of the log leave the page cache (later checkpoints reuse
    them instead of fresh pages); the last cache_keep bytes stay, and every entry still reads
    back. Without cache_keep nothing is dropped. (The kernel drops whole folios only: a large
    one, up to 2 MiB here, across the boundary stays until the next flush's drop.)"""
    keep = 1 << 20
    for cache_keep in (None, keep):
        d = tmp_path / str(cache_keep)
        logger = EntryLogger(d, log_size_limit=64 << 20, cache_keep=cache_keep)
        logger.open()
        items = [(7, e, bytes([e % 251]) * 64_000) for e in range(96)]  # ~6 MB
        locs = [elf.decode_location(v) for v in logger.add_entries(items)]
        logger.flush()
        cached = _cached_pages(d / elf.file_name(logger.log_id))
        end_page = locs[-1].offset // 4096
        if cache_keep is None:
            assert all(cached[:end_page])
        else:
            behind = (locs[-1].offset + locs[-1].length - keep) // 4096
            folio_floor = behind // 512 * 512
            assert folio_floor >= 1024 and not any(cached[:folio_floor])
            assert all(cached[behind + 1:end_page])
        for (l, e, data), loc in zip(items, locs):
            assert logger.read(loc, l, e) == data
        logger.close()


def test_ledger_storage_entry_logs_keep_64mb_cached_by_config(tmp_path: Path) -> None:
    for remove, keep in ((True, 64 << 20), (False, None)):
        storage = LedgerStorage(make_config(tmp_path / str(remove), entry_log_remove_pages_from_cache=remove),
                                BookieMetrics())
        storage.open()
        assert [d.entry_logger.cache_keep for d in storage.dirs] == [keep]
        storage.close()
