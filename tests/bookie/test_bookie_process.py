"""Process tests: a real `quire bookie` SIGKILLed under load many times, wiped dirs, shell.

The crash loop's invariant: after every restart each acknowledged entry reads back
byte-identical, and whatever else the bookie serves is an intact entry that a client really
sent (never torn or corrupt bytes).
"""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
from pathlib import Path

import trio

from bookie import entry_format
from bookie.protocol import Op, Status
from tests.bookie.helpers import BookieClient, entry
from tests.fixtures.processes import REPO_ROOT, QuireProcess, free_port

CYCLES = 20


def payload(ledger: int, eid: int) -> bytes:
    seed = hashlib.sha256(b"%d/%d" % (ledger, eid)).digest()
    return seed * (1 + (ledger * 7 + eid) % 40)  # 32 B .. 1.3 KiB


def bookie_args(root: Path, port: int, *extra: str) -> list[str]:
    return [
        "bookie", "--port", str(port), "--http-port", "0",
        "--journal-dir", str(root / "journal"), "--ledger-dirs", f"{root / 'l1'},{root / 'l2'}",
        # small caches, frequent checkpoints and small journals: crashes hit every stage
        "--set", "db_storage_write_cache_max_size_mb=2", "--set", "flush_interval_ms=150",
        "--set", "journal_max_size_mb=1", "--set", "journal_max_backups=1", "--set", "journal_pre_alloc_size_mb=1",
        "--set", "log_size_limit=2000000", "--log-level", "WARNING", *extra,
    ]


async def load(port: int, ledgers: list[int], next_id: dict[int, int], acked: dict[int, set[int]], stop: trio.Event) -> None:
    """Pipelined adds to several ledgers until the connection dies; records the acks."""
    async with trio.open_nursery() as nursery:
        client = await BookieClient.connect("127.0.0.1", port, nursery)

        async def one(ledger: int, eid: int) -> None:
            try:
                resp = await client.add(ledger, eid, payload(ledger, eid))
            except (ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if resp.status == Status.OK:
                acked[ledger].add(eid)

        limiter = trio.Semaphore(200)

        async def guarded(ledger: int, eid: int) -> None:
            async with limiter:
                await one(ledger, eid)

        try:
            while not stop.is_set():
                for ledger in ledgers:
                    eid = next_id[ledger]
                    next_id[ledger] += 1
                    await limiter.acquire()
                    limiter.release()
                    nursery.start_soon(guarded, ledger, eid)
                await trio.sleep(0)
        finally:
            nursery.cancel_scope.cancel()


async def verify(port: int, next_id: dict[int, int], acked: dict[int, set[int]]) -> int:
    """Every acked entry is intact; every other entry served is intact and really sent."""
    checked = 0
    async with trio.open_nursery() as nursery:
        client = await BookieClient.connect("127.0.0.1", port, nursery)
        for ledger, sent in next_id.items():
            eid = 0
            served: set[int] = set()
            while eid < sent + 5:
                resp = await client.call(Op.RANGE_READ, ledger_id=ledger, entry_id=eid, last_entry_id=sent + 5)
                if resp.status == Status.NO_ENTRY:
                    eid += 1  # a hole: an unacked entry lost with the crash
                    continue
                if resp.status == Status.NO_LEDGER:
                    # Nothing of the ledger survived: right only if none of its adds was
                    # acknowledged (a kill before its first add was journaled), which the
                    # check of the acknowledged entries below tells.
                    break
                assert resp.status == Status.OK, (ledger, eid, resp.status)
                for data in resp.entries:
                    hdr = entry_format.verify(data)  # raises on torn/corrupt bytes
                    assert (hdr.ledger_id, hdr.entry_id) == (ledger, eid)
                    assert hdr.entry_id < sent and entry_format.payload(data) == payload(ledger, eid)
                    served.add(eid)
                    eid += 1
                    checked += 1
            missing = acked[ledger] - served
            assert not missing, f"ledger {ledger}: acknowledged entries lost: {sorted(missing)[:10]} of {len(acked[ledger])} ({resp.status!r})"
        await client.aclose()
        nursery.cancel_scope.cancel()
    return checked


def test_sigkill_under_load_never_loses_acked_entries(tmp_path: Path) -> None:
    port = free_port()
    args = bookie_args(tmp_path, port, "--set", "http_server_enabled=false")
    proc = QuireProcess.quire(args, log_path=tmp_path / "bookie.log", ready_log="ready")
    rng = random.Random(1234)
    next_id: dict[int, int] = {}
    acked: dict[int, set[int]] = {}
    total_acked = 0
    try:
        proc.start().wait_ready(60)
        for cycle in range(CYCLES):
            # two fresh ledgers per cycle plus one that lives through every crash
            ledgers = [1, 100 + 2 * cycle, 101 + 2 * cycle]
            for l in ledgers:
                next_id.setdefault(l, 0)
                acked.setdefault(l, set())
            # restarts can leave a hole after the last acked entry of ledger 1: continue past it
            next_id[1] = max(next_id[1], max(acked[1], default=-1) + 1)

            async def cycle_main() -> None:
                stop = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(load, port, ledgers, next_id, acked, stop)
                    await trio.sleep(rng.uniform(0.1, 0.45))
                    proc.kill()  # SIGKILL at a random point of the load
                    stop.set()

            trio.run(cycle_main)
            proc.start().wait_ready(60)
            # this cycle's ledgers every time; all ledgers (older data through more crashes,
            # checkpoints and journal deletions) every fifth cycle and at the end
            full = cycle % 5 == 4 or cycle == CYCLES - 1
            check = next_id if full else {l: next_id[l] for l in ledgers}
            trio.run(verify, port, check, acked)
            total_acked = sum(map(len, acked.values()))
        assert total_acked > CYCLES * 50  # the load really ran
    finally:
        proc.kill()


def test_wiped_ledger_dir_refuses_to_start_and_shell_inspects(tmp_path: Path) -> None:
    port = free_port()
    meta = f"rocksdb://{tmp_path / 'meta'}"
    args = bookie_args(tmp_path, port, "--metadata-url", meta)
    proc = QuireProcess.quire(args, log_path=tmp_path / "bookie.log", ready_log="ready")
    try:
        proc.start().wait_ready(60)
        proc.terminate()  # graceful: journal flushed, final checkpoint, mark persisted
        assert proc.returncode == 0
        dirs = f"{tmp_path / 'l1'},{tmp_path / 'l2'}"
        shell = [sys.executable, "-m", "quire", "bookie-shell"]
        out = subprocess.run([*shell, "last-mark", "--ledger-dirs", dirs], capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0 and "last mark: (" in out.stdout, out.stderr
        journals = sorted((tmp_path / "journal" / "current").glob("*.txn"))
        out = subprocess.run([*shell, "journal-dump", str(journals[-1])], capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0 and "scan stopped" in out.stdout, out.stderr
        logs = sorted((tmp_path / "l1" / "current").glob("*.log"))
        out = subprocess.run([*shell, "entrylog-dump", str(logs[0])], capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0 and "entries" in out.stdout, out.stderr
        # wipe one ledger dir: the bookie must refuse to start, saying why
        import shutil

        shutil.rmtree(tmp_path / "l2")
        proc.start()
        assert proc.wait(60) == 2
        assert "wiped" in proc.log_text()
    finally:
        proc.kill()


def test_shell_reads_entries_after_graceful_shutdown(tmp_path: Path) -> None:
    port = free_port()
    proc = QuireProcess.quire(bookie_args(tmp_path, port), log_path=tmp_path / "bookie.log", ready_log="ready")
    try:
        proc.start().wait_ready(60)

        async def add_some() -> None:
            async with trio.open_nursery() as nursery:
                c = await BookieClient.connect("127.0.0.1", port, nursery)
                for i in range(10):
                    assert (await c.add(5, i, payload(5, i))).status == Status.OK
                await c.aclose()
                nursery.cancel_scope.cancel()

        trio.run(add_some)
        assert proc.terminate() == 0
        dirs = f"{tmp_path / 'l1'},{tmp_path / 'l2'}"
        shell = [sys.executable, "-m", "quire", "bookie-shell"]
        out = subprocess.run([*shell, "list-ledgers", "--ledger-dirs", dirs], capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0 and '"ledger": 5' in out.stdout and '"last_entry": 9' in out.stdout, out.stderr
        out = subprocess.run([*shell, "read-entry", "--ledger-dirs", dirs, "5", "3"], capture_output=True, text=True, cwd=REPO_ROOT)
        assert out.returncode == 0 and '"digest": "ok"' in out.stdout, out.stderr
        # a graceful shutdown leaves nothing to replay
        proc.start().wait_ready(60)
        assert "replayed" not in proc._log_since_start()
    finally:
        proc.kill()


def test_registers_in_real_zookeeper_and_refuses_unknown_ledgers(tmp_path: Path, zk_url: str) -> None:
    from metadata import open_store
    from metadata.ledger_ids import ledger_path

    port = free_port()
    proc = QuireProcess.quire(bookie_args(tmp_path, port, "--metadata-url", zk_url),
                              log_path=tmp_path / "bookie.log", ready_log="ready")
    bookie_id = f"127.0.0.1:{port}"

    async def check_running() -> None:
        store = await open_store(zk_url)
        try:
            assert bookie_id in await store.children("/ledgers/available")
            assert (await store.exists(f"/ledgers/cookies/{bookie_id}")) is not None
            assert (await store.exists("/ledgers/INSTANCEID")) is not None
            await store.create(ledger_path(1), b"ledger metadata", make_parents=True)
            async with trio.open_nursery() as nursery:
                c = await BookieClient.connect("127.0.0.1", port, nursery)
                assert (await c.add(1, 0, b"a")).status == Status.OK
                assert (await c.add(2, 0, b"b")).status == Status.NO_LEDGER  # no metadata: deleted
                await c.aclose()
                nursery.cancel_scope.cancel()
        finally:
            await store.close()

    async def check_gone() -> None:
        store = await open_store(zk_url)
        try:
            assert bookie_id not in await store.children("/ledgers/available")
        finally:
            await store.close()

    try:
        proc.start().wait_ready(60)
        trio.run(check_running)
        assert proc.terminate() == 0
        trio.run(check_gone)
    finally:
        proc.kill()
