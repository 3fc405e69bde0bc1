"""The in-process channel to a co-located bookie (standalone): no socket, same durability.

A bookie handed to ``BookKeeper(local_bookies=...)`` is reached through its request processor
directly; every add must still be acknowledged only after the journal group holding it was
fdatasynced, slow-path requests (first add of a ledger, fence reads) keep their order, and
recovery/fencing behave as over a socket.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from bookie.bookie import Bookie
from bookie.client import BKError, BKLedgerFencedError, BookKeeper
from bookie.client.local_bookie import LocalBookieConnection
from bookie.journal import Journal
from metadata import open_store
from tests.bookie.helpers import make_config
from tests.bookie.client.conftest import fast_config


@pytest.fixture
async def local_bookie(tmp_path: Path, nursery: trio.Nursery):
    store = await open_store(f"memory://local-bookie-{uuid.uuid4().hex}")
    bookie = Bookie(make_config(tmp_path), store)
    await bookie.start(nursery)
    try:
        yield bookie, store
    finally:
        await bookie.close()
        await store.close()


async def test_adds_are_acked_after_fsync_without_a_socket(local_bookie, monkeypatch) -> None:
    bookie, store = local_bookie
    synced = 0  # journal records written by groups that were fdatasynced
    real_write_group = Journal._write_group

    def write_group(self, bufs, sync, size):  # type: ignore[no-untyped-def]
        nonlocal synced
        mark = real_write_group(self, bufs, sync, size)
        if sync:
            synced += len(bufs) // 2  # (prefix, payload) per record
        return mark

    monkeypatch.setattr(Journal, "_write_group", write_group)
    async with BookKeeper(store, fast_config(), local_bookies={bookie.bookie_id: bookie.processor}) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        acked: dict[int, bytes] = {}

        async def add(i: int) -> None:
            data = b"entry-%d" % i
            eid = await lh.add_entry(data)
            # entries 0..eid (and the ledger's master-key record) are all in fsynced groups
            assert synced >= eid + 1, "acknowledged before its journal group was fsynced"
            acked[eid] = data

        for i in range(5):  # one at a time, then pipelined (tasks start in any order)
            await add(i)
        async with trio.open_nursery() as n:
            for i in range(5, 200):
                n.start_soon(add, i)
        assert sorted(acked) == list(range(200))
        conn = bk.connection(bookie.bookie_id)
        assert isinstance(conn, LocalBookieConnection) and conn.outstanding == 0
        assert [e.data for e in await lh.read(0, 199)] == [acked[i] for i in range(200)]
    assert bookie.processor.counts.get(("add", 0), 0) == 200


async def test_recovery_fences_the_writer_through_the_local_channel(local_bookie) -> None:
    bookie, store = local_bookie
    local = {bookie.bookie_id: bookie.processor}
    async with BookKeeper(store, fast_config(), local_bookies=local) as writer, \
            BookKeeper(store, fast_config(), local_bookies=local) as reader:
        lh = await writer.create_ledger(1, 1, 1, password=b"pw")
        for i in range(20):
            await lh.add_entry(b"e%d" % i)
        rh = await reader.open_ledger(lh.ledger_id, password=b"pw", recovery=True)
        assert rh.is_closed and rh.last_add_confirmed == 19
        assert [e.data for e in await rh.read(0, 19)] == [b"e%d" % i for i in range(20)]
        with pytest.raises(BKLedgerFencedError):
            await lh.add_entry(b"late")


async def test_range_reads_come_back_without_a_frame(local_bookie, monkeypatch) -> None:
    """A range read through the local channel: the processor hands the entries over as they
    are (no reply frame encoded and decoded), from the write cache and, after a checkpoint,
    from the entry logs; the socket path still gets its frame."""
    bookie, store = local_bookie
    from bookie import protocol

    decoded: list[int] = []
    real_decode = protocol.decode_response

    def decode(frame):
        resp = real_decode(frame)
        decoded.append(resp.op)
        return resp

    monkeypatch.setattr("bookie.client.local_bookie.decode_response", decode)
    async with BookKeeper(store, fast_config(), local_bookies={bookie.bookie_id: bookie.processor}) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        data = [b"r%d-" % i * (1 + i % 7) for i in range(300)]
        for d in data:
            await lh.add_entry(d)
        assert [e.data for e in await lh.read(0, 299)] == data
        await bookie.sync_thread.checkpoint()
        bookie.storage.read_cache = type(bookie.storage.read_cache)(1 << 20)
        assert [e.data for e in await lh.read(0, 299)] == data
        assert [e.data for e in await lh.read(123, 130)] == data[123:131]
        assert protocol.Op.RANGE_READ not in decoded
    assert bookie.processor.counts.get(("read", 0), 0) >= 600


async def test_local_range_reads_check_each_entry_once(local_bookie, monkeypatch) -> None:
    """Entries read by range from the co-located bookie are checked once end to end: the
    bookie verifies the checksum it stored (the entry log record's CRC32C) and hands the bytes
    over in memory, so the client checks their ids, not their digests a second time. A rotten
    byte on disk is still never returned as data."""
    bookie, store = local_bookie
    from bookie import entry_format

    digests: list[int] = []
    real_is_entry = entry_format.is_entry

    def counted(data, ledger_id, entry_id):  # type: ignore[no-untyped-def]
        digests.append(entry_id)
        return real_is_entry(data, ledger_id, entry_id)

    monkeypatch.setattr(entry_format, "is_entry", counted)
    async with BookKeeper(store, fast_config(), local_bookies={bookie.bookie_id: bookie.processor}) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        data = [b"c%d-" % i * (1 + i % 5) for i in range(200)]
        for d in data:
            await lh.add_entry(d)
        assert [e.data for e in await lh.read(0, 199)] == data  # from the write cache
        await bookie.sync_thread.checkpoint()
        storage = bookie.storage
        storage.read_cache = type(storage.read_cache)(1 << 20)
        assert [e.data for e in await lh.read(0, 199)] == data  # from the entry log
        assert await lh.read_payloads(50, 120) == data[50:121]  # the managed ledger's reads
        assert digests == []
        d = storage._dir_for(lh.ledger_id)
        loc = d.locations.get(lh.ledger_id, 150)
        assert loc is not None
        with open(d.current / f"{loc.log_id:x}.log", "r+b") as f:  # rot one byte of entry 150's payload
            f.seek(loc.offset + loc.length - 2)
            f.write(bytes([f.read(1)[0] ^ 0xFF]))
        storage.read_cache = type(storage.read_cache)(1 << 20)
        assert [e.data for e in await lh.read(0, 149)] == data[:150]
        with pytest.raises(BKError):
            await lh.read(140, 199)


async def test_local_range_reads_take_the_bookies_cap_not_the_client_batch(local_bookie, monkeypatch) -> None:
    """Reads from in-process bookies go by the bookie's own cap on a range read (10,000
    entries, ~4 MiB), not ``max_entries_per_read_batch``: each request is a trip to the
    bookie's disk thread. An answer cut short by the bookie's byte cap is asked on from where
    it ended, and every entry comes back once, in order."""
    bookie, store = local_bookie
    from bookie.client import read_ops

    ranges: list[tuple[int, int, int]] = []
    real_range_read = read_ops._range_read

    async def counted(client, ledger_id, md, first, last, master_key):  # type: ignore[no-untyped-def]
        got = await real_range_read(client, ledger_id, md, first, last, master_key)
        ranges.append((first, last, len(got)))
        return got

    monkeypatch.setattr(read_ops, "_range_read", counted)
    config = fast_config()
    config.max_entries_per_read_batch = 50
    async with BookKeeper(store, config, local_bookies={bookie.bookie_id: bookie.processor}) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        data = [bytes([i % 251]) * 20_000 for i in range(300)]  # 6 MB: over the bookie's 4 MiB cap
        for d in data:
            await lh.add_entry(d)
        await bookie.sync_thread.checkpoint()
        bookie.storage.read_cache = type(bookie.storage.read_cache)(1 << 20)
        assert await lh.read_payloads(0, 299) == data
        assert ranges[0][:2] == (0, 299) and 0 < ranges[0][2] < 300  # cut by the byte cap
        assert len(ranges) == 2 and ranges[1] == (ranges[0][2], 299, 300 - ranges[0][2])


async def test_common_adds_take_the_processor_without_a_request(local_bookie, monkeypatch) -> None:
    """Past a ledger's first add (the slow path: its state is looked up), a common add goes to
    RequestProcessor.add_common from its fields: no Request is built; an add it does not take
    (the writer fenced meanwhile) still gets its status through the general path."""
    from bookie.client import local_bookie as local_bookie_module

    bookie, store = local_bookie
    built: list[object] = []
    real_request = local_bookie_module.Request

    def counting_request(*args: object, **kwargs: object) -> object:
        req = real_request(*args, **kwargs)  # type: ignore[arg-type]
        built.append(req)
        return req

    monkeypatch.setattr(local_bookie_module, "Request", counting_request)
    local = {bookie.bookie_id: bookie.processor}
    async with BookKeeper(store, fast_config(), local_bookies=local) as writer, \
            BookKeeper(store, fast_config(), local_bookies=local) as reader:
        lh = await writer.create_ledger(1, 1, 1, password=b"pw")
        await lh.add_entry(b"first")
        first = len(built)
        for i in range(50):
            await lh.add_entry(b"e%d" % i)
        assert len(built) == first, "a common add built a Request"
        await reader.open_ledger(lh.ledger_id, password=b"pw", recovery=True)
        before = len(built)
        with pytest.raises(BKLedgerFencedError):
            await lh.add_entry(b"late")
        assert len(built) > before  # the fenced add took the general path, which answered it
