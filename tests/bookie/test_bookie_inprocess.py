"""In-process bookie tests over real sockets: request semantics, fencing, LAC, recovery,
cookies, registration, HTTP and garbage on the wire."""

from __future__ import annotations

import socket
import uuid
from functools import partial
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie import entry_format, protocol
from bookie.bookie import Bookie
from bookie.config import BookieConfig
from bookie.errors import CookieError
from bookie.protocol import Flag, Op, Status
from metadata import open_store
from metadata.ledger_ids import ledger_path
from metadata.store import MetadataStore
from tests.bookie.helpers import MASTER_KEY, BookieClient, entry, make_config


class Running:
    """A started bookie plus a connected client, inside a test's nursery."""

    def __init__(self, bookie: Bookie, client: BookieClient, nursery: trio.Nursery) -> None:
        self.bookie, self.client, self.nursery = bookie, client, nursery

    async def stop(self) -> None:
        await self.client.aclose()
        await self.bookie.close()


async def start(cfg: BookieConfig, nursery: trio.Nursery, store: MetadataStore | None = None) -> Running:
    b = Bookie(cfg, store)
    await b.start(nursery)
    return Running(b, await BookieClient.connect("127.0.0.1", b.port, nursery), nursery)


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    yield s
    await s.close()


async def test_add_read_restart(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for i in range(20):
            resp = await c.add(1, i, b"x%d" % i)
            assert resp.status == Status.OK and (resp.ledger_id, resp.entry_id) == (1, i)
        resp = await c.read(1, 5)
        assert resp.status == Status.OK and entry_format.payload(resp.body) == b"x5"
        assert (await c.read(1, 50)).status == Status.NO_ENTRY
        assert (await c.read(2, 0)).status == Status.NO_LEDGER
        await r.stop()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for i in range(20):
            resp = await r.client.read(1, i)
            assert resp.status == Status.OK and entry_format.payload(resp.body) == b"x%d" % i
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_fence_recovery_add_and_master_key(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for i in range(3):
            assert (await c.add(7, i, b"e%d" % i)).status == Status.OK
        assert (await c.add(7, 3, b"bad", key=b"other")).status == Status.UNAUTHORIZED
        bad = await c.read(7, -1, flags=Flag.FENCE, master_key=b"other")
        assert bad.status == Status.UNAUTHORIZED
        journal_writes = 0
        append_and_wait = r.bookie.journal.append_and_wait

        async def counting(payload: bytes) -> None:
            nonlocal journal_writes
            journal_writes += 1
            await append_and_wait(payload)

        r.bookie.journal.append_and_wait = counting  # type: ignore[method-assign]
        # concurrent fencing reads (recovery sends one per entry): one journal fence record
        async with trio.open_nursery() as fencers:
            for eid in (-1, 0, 1, 2):
                fencers.start_soon(partial(c.read, 7, eid, flags=Flag.FENCE, master_key=MASTER_KEY))
        assert journal_writes == 1
        fence = await c.read(7, -1, flags=Flag.FENCE, master_key=MASTER_KEY)
        assert fence.status == Status.OK and journal_writes == 1
        assert fence.entry_id == 2 and entry_format.payload(fence.body) == b"e2" and fence.lac == 1
        assert (await c.add(7, 3, b"late")).status == Status.FENCED
        assert (await c.add(7, 3, b"rec", flags=Flag.RECOVERY_ADD)).status == Status.OK
        # fence on a ledger the bookie never saw: NO_ENTRY, but the ledger is fenced from now on
        empty = await c.read(8, -1, flags=Flag.FENCE, master_key=MASTER_KEY)
        assert empty.status == Status.NO_ENTRY
        assert (await c.add(8, 0, b"x")).status == Status.FENCED
        # an entry whose ids do not match the request is refused
        resp = await c.call(Op.ADD, ledger_id=9, entry_id=1, master_key=MASTER_KEY, body=entry(9, 2, b"x"))
        assert resp.status == Status.BAD_REQUEST
        # simulate a crash: no graceful close, so the fence lives only in the journal
        r.bookie.state.shutting_down = True
        r.bookie._cancel.cancel()
        await r.bookie._stopped.wait()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        assert r.bookie.replayed_records > 0
        assert (await r.client.add(7, 4, b"late")).status == Status.FENCED
        assert entry_format.payload((await r.client.read(7, 3)).body) == b"rec"
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_lac_long_poll_range_read_and_info(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for i in range(5):
            assert (await c.add(3, i, b"%d" % i)).status == Status.OK
        lac = await c.read(3, -1)
        assert lac.status == Status.OK and lac.lac == 3

        async def add_later() -> None:
            await trio.sleep(0.1)
            await c.add(3, 5, b"5")

        nursery.start_soon(add_later)
        with trio.fail_after(5):
            poll = await c.read(3, -1, previous_lac=3, timeout_ms=3000, flags=Flag.PIGGYBACK)
        assert poll.status == Status.OK and poll.lac == 4 and poll.entry_id == 4
        assert entry_format.payload(poll.body) == b"4"
        timed_out = await c.read(3, -1, previous_lac=10, timeout_ms=50)
        assert timed_out.status == Status.OK and timed_out.lac == 4

        rng = await c.call(Op.RANGE_READ, ledger_id=3, entry_id=1, last_entry_id=10, max_entries=3)
        assert rng.status == Status.OK and [entry_format.payload(e) for e in rng.entries] == [b"1", b"2", b"3"]
        rng = await c.call(Op.RANGE_READ, ledger_id=3, entry_id=4, last_entry_id=10)
        assert [entry_format.payload(e) for e in rng.entries] == [b"4", b"5"] and rng.last_entry_id == 5
        assert (await c.call(Op.RANGE_READ, ledger_id=3, entry_id=9, last_entry_id=10)).status == Status.NO_ENTRY

        w = await c.call(Op.WRITE_LAC, ledger_id=3, entry_id=5, master_key=MASTER_KEY, body=b"lac-body")
        assert w.status == Status.OK
        rl = await c.call(Op.READ_LAC, ledger_id=3)
        assert rl.status == Status.OK and rl.lac == 5 and rl.body == b"lac-body"
        assert entry_format.verify(rl.entries[0]).entry_id == 5
        info = await c.call(Op.BOOKIE_INFO)
        assert info.status == Status.OK and 0 < info.free_disk <= info.total_disk
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_checkpoint_moves_mark_and_reads_hit_disk(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for i in range(50):
            assert (await r.client.add(4, i, bytes(1000))).status == Status.OK
        before = r.bookie.sync_thread.persisted_mark
        mark = await r.bookie.sync_thread.checkpoint()
        assert mark > before
        r.bookie.storage.read_cache = type(r.bookie.storage.read_cache)(1 << 20)
        for i in (0, 49):
            resp = await r.client.read(4, i)
            assert resp.status == Status.OK and entry_format.verify(resp.body).entry_id == i
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_range_read_from_entry_logs_reads_runs_not_entries(tmp_path: Path) -> None:
    """A RANGE_READ of checkpointed entries: every entry, in order, within the byte budget,
    one worker-thread hop per run of the ledger in its entry log (not one per entry), and
    nothing copied into the read-ahead cache; a range reaching into the write cache ends
    there seamlessly."""
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        sizes = [1 + (i * 37) % 300 for i in range(400)]
        for i, n in enumerate(sizes):
            # two ledgers interleaved: the checkpoint writes each one's entries as one run
            assert (await c.add(21, i, bytes([i % 251]) * n)).status == Status.OK
            assert (await c.add(22, i, b"other")).status == Status.OK
        await r.bookie.sync_thread.checkpoint()
        for i in range(400, 410):
            assert (await c.add(21, i, b"tail-%d" % i)).status == Status.OK  # only in the write cache
        storage = r.bookie.storage
        storage.read_cache = type(storage.read_cache)(1 << 20)
        hops = []
        real = storage._read_run_from_disk

        def counted(*args: object) -> list[bytes]:
            hops.append(args[2])
            return real(*args)  # type: ignore[arg-type]

        storage._read_run_from_disk = counted  # type: ignore[method-assign, assignment]
        rng = await c.call(Op.RANGE_READ, ledger_id=21, entry_id=0, last_entry_id=409, max_entries=1000)
        assert rng.status == Status.OK and rng.last_entry_id == 409
        got = [entry_format.verify(e).entry_id for e in rng.entries]
        assert got == list(range(410))
        assert [len(entry_format.payload(e)) for e in rng.entries[:400]] == sizes
        assert hops == [0] and len(storage.read_cache) == 0
        # the byte budget: whole entries only, never past it (the first one always)
        budget = sum(len(e) for e in rng.entries[100:150])
        part = await c.call(Op.RANGE_READ, ledger_id=21, entry_id=100, last_entry_id=409, max_bytes=budget + 1)
        assert [entry_format.verify(e).entry_id for e in part.entries] == list(range(100, 150))
        one = await c.call(Op.RANGE_READ, ledger_id=21, entry_id=7, last_entry_id=9, max_bytes=1)
        assert [entry_format.verify(e).entry_id for e in one.entries] == [7]
        other = await c.call(Op.RANGE_READ, ledger_id=22, entry_id=395, last_entry_id=500)
        assert [entry_format.payload(e) for e in other.entries] == [b"other"] * 5
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_registration_deleted_ledger_and_read_only(tmp_path: Path, store: MetadataStore) -> None:
    cfg = make_config(tmp_path, metadata_service_uri="memory://test")
    await store.create(ledger_path(1), b"meta", make_parents=True)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        assert await store.children("/ledgers/available") == [cfg.bookie_id, "readonly"] or cfg.bookie_id in (
            await store.children("/ledgers/available")
        )
        assert (await store.get(f"/ledgers/cookies/{cfg.bookie_id}"))[0]
        assert (await r.client.add(1, 0, b"ok")).status == Status.OK
        # ledger 2 has no metadata (deleted): refused, and not silently created
        assert (await r.client.add(2, 0, b"x")).status == Status.NO_LEDGER
        assert (await r.client.add(2, 1, b"x")).status == Status.NO_LEDGER
        assert (await r.client.read(2, 0)).status == Status.NO_LEDGER
        # over the disk threshold: read-only registration, adds refused
        r.bookie.config.disk_usage_threshold = 0.0
        assert r.bookie.registration.check_disks()
        await r.bookie.registration.register()
        assert cfg.bookie_id in await store.children("/ledgers/available/readonly")
        assert cfg.bookie_id not in await store.children("/ledgers/available")
        assert (await r.client.add(1, 1, b"ro")).status == Status.READ_ONLY
        assert (await r.client.read(1, 0)).status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()
    assert cfg.bookie_id not in await store.children("/ledgers/available/readonly")


async def test_cookie_refuses_wiped_or_changed_dirs(tmp_path: Path, store: MetadataStore) -> None:
    cfg = make_config(tmp_path, metadata_service_uri="memory://test")
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        assert (await r.client.add(1, 0, b"x")).status in (Status.OK, Status.NO_LEDGER)
        await r.stop()
        nursery.cancel_scope.cancel()
    # the ledger dir was wiped (disk replaced): refuse to start
    import shutil

    shutil.rmtree(tmp_path / "ledgers")
    with pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await Bookie(make_config(tmp_path, metadata_service_uri="memory://test", bookie_port=cfg.bookie_port), store).start(nursery)
    assert info.group_contains(CookieError, match="wiped")
    # a different ledger dir set than the registered cookie: refuse too
    other = make_config(tmp_path, metadata_service_uri="memory://test", bookie_port=cfg.bookie_port,
                        ledger_directories=[str(tmp_path / "other")])
    with pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await Bookie(other, store).start(nursery)
    assert info.group_contains(CookieError)


def _samples(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


async def test_http_state_info_metrics(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, http_server_enabled=True, http_server_port=0)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for i in range(3):
            await r.client.add(1, i, b"m")
        assert (await r.client.read(1, 0)).status == Status.OK  # write cache hit
        await r.bookie.sync_thread.checkpoint()
        assert (await r.client.read(1, 1)).status == Status.OK  # miss: entry log, read-ahead of entry 2
        assert (await r.client.read(1, 2)).status == Status.OK  # read cache hit
        assert (await r.client.read(1, 9)).status == Status.NO_ENTRY
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.bookie.http_port}") as http:
            state = (await http.get("/api/v1/bookie/state")).json()
            assert state["running"] and not state["readOnly"] and not state["shuttingDown"]
            info = (await http.get("/api/v1/bookie/info")).json()
            assert info["totalSpace"] >= info["freeSpace"] > 0 and info["ledgers"] == 1
            assert info["bookieId"] == cfg.bookie_id and info["lastLogMark"].startswith("(")
            metrics = _samples((await http.get("/metrics")).text)
            assert metrics['bookie_add_entry_total{status="OK"}'] == 3
            assert metrics['bookie_read_entry_total{status="OK"}'] == 3
            assert metrics['bookie_read_entry_total{status="NO_ENTRY"}'] == 1
            assert metrics["bookie_journal_sync_seconds_count"] >= 1  # fsync latency histogram
            assert metrics["bookie_journal_group_entries_sum"] >= 3  # group sizes (master key record too)
            assert metrics["bookie_journal_group_bytes_count"] >= 1
            assert metrics["bookie_write_cache_hits_total"] == 1
            assert metrics["bookie_read_cache_misses_total"] >= 1
            assert metrics["bookie_read_cache_hits_total"] == 1
            assert metrics["bookie_checkpoint_seconds_count"] >= 1 and metrics["bookie_checkpoint_entries_total"] == 3
        await r.stop()
        nursery.cancel_scope.cancel()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=4))
def test_fuzz_garbage_on_the_wire(tmp_path_factory: pytest.TempPathFactory, garbage: list[bytes]) -> None:
    """Random frames and random bytes: the connection may be closed, the bookie keeps serving."""
    root = tmp_path_factory.mktemp("fuzz")

    async def main() -> None:
        cfg = make_config(root)
        async with trio.open_nursery() as nursery:
            r = await start(cfg, nursery)
            for blob in garbage:
                for data in (blob, protocol.encode_frame([1, 2, 3], blob), len(blob).to_bytes(4, "big") + blob):
                    stream = await trio.open_tcp_stream("127.0.0.1", r.bookie.port)
                    try:
                        await stream.send_all(data)
                        with trio.move_on_after(0.05):
                            await stream.receive_some(1024)
                    except trio.BrokenResourceError:
                        pass
                    await stream.aclose()
            assert (await r.client.add(1, 0, b"still alive")).status == Status.OK
            await r.stop()
            nursery.cancel_scope.cancel()

    trio.run(main)


async def test_explicit_lac_and_master_key_survive_crash(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for i in range(3):
            assert (await c.add(11, i, b"v")).status == Status.OK
        w = await c.call(Op.WRITE_LAC, ledger_id=11, entry_id=2, master_key=MASTER_KEY, body=b"explicit")
        assert w.status == Status.OK
        r.bookie.state.shutting_down = True  # crash: skip the graceful flush and checkpoint
        r.bookie._cancel.cancel()
        await r.bookie._stopped.wait()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        rl = await r.client.call(Op.READ_LAC, ledger_id=11)
        assert rl.status == Status.OK and rl.lac == 2 and rl.body == b"explicit" and rl.last_entry_id == 2
        assert (await r.client.add(11, 3, b"v", key=b"wrong")).status == Status.UNAUTHORIZED
        assert (await r.client.add(11, 3, b"v")).status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_unreadable_indexed_entry_is_io_error_never_no_entry(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for i in range(5):
            assert (await r.client.add(12, i, b"data-%d" % i)).status == Status.OK
        await r.bookie.sync_thread.checkpoint()
        r.bookie.storage.read_cache = type(r.bookie.storage.read_cache)(1 << 20)
        d = r.bookie.storage._dir_for(12)
        loc = d.locations.get(12, 3)
        assert loc is not None
        with open(d.current / f"{loc.log_id:x}.log", "r+b") as f:  # rot one byte of entry 3
            f.seek(loc.offset + loc.length - 2)
            f.write(b"\xff")
        assert (await r.client.read(12, 3)).status == Status.IO
        rng = await r.client.call(Op.RANGE_READ, ledger_id=12, entry_id=3, last_entry_id=4)
        assert rng.status == Status.IO
        assert (await r.client.read(12, 4)).status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()
