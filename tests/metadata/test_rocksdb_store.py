"""The embedded RocksDB backend: durability across SIGKILL, one owner process, sessions
shared in one process through EmbeddedMetadata."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from metadata import open_store
from metadata.errors import SessionLostError, StoreUnavailableError
from metadata.rocksdb_store import EmbeddedMetadata, open_rocksdb_store

WRITER = Path(__file__).with_name("rocksdb_writer.py")


async def test_acknowledged_writes_survive_sigkill(quire_procs, tmp_path: Path) -> None:
    url = f"rocksdb://{tmp_path / 'meta'}"
    proc = quire_procs.command(
        [sys.executable, str(WRITER), url, "batch", "40"], name="writer", ready_log="^written 40"
    )
    # The live process owns the database: a second opener is refused, not corrupted.
    with pytest.raises(StoreUnavailableError):
        await open_store(url)
    # ...but tools can read a snapshot meanwhile, the live ephemeral node included.
    snapshot = await open_rocksdb_store(str(tmp_path / "meta"), read_only=True)
    try:
        assert (await snapshot.get("/eph"))[1].ephemeral
        assert len(await snapshot.children("/durable")) == 80
        with pytest.raises(StoreUnavailableError):
            await snapshot.put("/durable/k000", b"no")
    finally:
        await snapshot.close()
    ls = await trio.run_process(
        [sys.executable, "-m", "quire", "metadata", "ls", "--url", url, "/durable"],
        capture_stdout=True,
        capture_stderr=True,
    )
    assert b"k039" in ls.stdout and b"read-only snapshot" in ls.stderr
    proc.kill()

    store = await open_store(url)
    try:
        kids = await store.children("/durable")
        assert [k for k in kids if k.startswith("k")] == [f"k{i:03d}" for i in range(40)]
        assert (await store.get("/durable/k039"))[0] == b"value-39"
        seqs = sorted(k for k in kids if k.startswith("s-"))
        assert len(seqs) == 40
        # The dead process's ephemeral node was swept when the database was reopened.
        assert await store.exists("/eph") is None
        assert "eph" not in await store.children("/")
        # Sequence numbers continue after the restart: never reused.
        new = await store.create("/durable/s-", b"", sequential=True)
        assert new.rsplit("/", 1)[1] > seqs[-1]
    finally:
        await store.close()


async def test_embedded_metadata_shares_one_database(tmp_path: Path) -> None:
    path = tmp_path / "meta"
    url = f"rocksdb://{path}"
    async with await EmbeddedMetadata.open(path) as emb:
        broker = await emb.session()
        bookie = await open_store(url)  # same process, same path: shares emb's database
        lost = trio.Event()
        bookie.on_session_lost(lost.set)
        await bookie.create("/ledgers/available/127.0.0.1:3181", b"", ephemeral=True, make_parents=True)
        await broker.create("/namespace/owner", b"broker", ephemeral=True, make_parents=True)
        assert await broker.children("/ledgers/available") == ["127.0.0.1:3181"]
        assert broker.session_id != bookie.session_id

        await emb.expire_session(bookie)
        with trio.fail_after(5):
            await lost.wait()
        assert await broker.children("/ledgers/available") == []
        assert await broker.exists("/namespace/owner") is not None  # other sessions unaffected
        await bookie.create("/ledgers/available/127.0.0.1:3181", b"", ephemeral=True)  # new session
        await bookie.close()
        await broker.put("/persist", b"kept")
        await broker.close()
        with pytest.raises(SessionLostError):
            await broker.get("/persist")

    # Every reference released: the database is closed and can be reopened.
    store = await open_store(url)
    try:
        assert (await store.get("/persist"))[0] == b"kept"
        assert await store.exists("/namespace/owner") is None
        assert await store.children("/ledgers/available") == []
    finally:
        await store.close()


async def test_every_acknowledged_write_survives_sigkill_mid_stream(quire_procs, tmp_path: Path) -> None:
    """Concurrent writers sharing group-committed fsyncs: whatever was acknowledged before the
    SIGKILL is there after reopening."""
    url = f"rocksdb://{tmp_path / 'meta'}"
    proc = quire_procs.command([sys.executable, str(WRITER), url, "stream"], name="stream-writer")
    await proc.wait_for_log_async(r"^acked /stream/w\d-000150$")
    proc.kill()
    # the SIGKILL may cut the last line short ("acked " with no path): only whole lines count
    acked = [parts[1] for line in proc.log_text().splitlines()
             if line.startswith("acked ") and len(parts := line.split()) == 2]
    assert len(acked) > 150
    store = await open_store(url)
    try:
        present = set(await store.children("/stream"))
        assert {p.rsplit("/", 1)[1] for p in acked} <= present
        value, stat = await store.get("/stream")
        assert stat.version >= len(acked) and stat.num_children == len(present)
    finally:
        await store.close()
