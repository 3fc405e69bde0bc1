"""ZooKeeper down, paused, killed or restarting: operations fail within the operation timeout
with StoreUnavailableError (nothing blocks forever) and work again once it is back."""

from __future__ import annotations

import pytest
import trio

from metadata import open_store
from metadata.errors import StoreUnavailableError
from tests.fixtures.zookeeper import ZooKeeperServer
from tests.metadata.test_contract import Recorder

OP_TIMEOUT = 1.5
GUARD = OP_TIMEOUT + 8  # liveness bound, not a speed assertion


async def _until_ok(fn, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    with trio.fail_after(timeout):
        while True:
            try:
                return await fn()
            except StoreUnavailableError:
                await trio.sleep(0.1)


@pytest.fixture
def restore_zk(zk_server: ZooKeeperServer):  # type: ignore[no-untyped-def]
    """Whatever a test does to the shared server, later tests find it running."""
    yield zk_server
    if not zk_server.is_running:
        zk_server.start()
    else:
        zk_server.resume()


async def test_down_then_restart(restore_zk: ZooKeeperServer, zk_url: str) -> None:
    zk = restore_zk
    store = await open_store(zk_url, operation_timeout_s=OP_TIMEOUT, session_timeout_s=30.0)
    try:
        await store.create("/p", b"before")
        await store.create("/e", b"mine", ephemeral=True)
        rec = Recorder()
        await store.get("/p", watch=rec)
        await trio.to_thread.run_sync(zk.stop)

        async def fails(op) -> None:  # type: ignore[no-untyped-def]
            with pytest.raises(StoreUnavailableError):
                await op()

        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                for op in (
                    lambda: store.get("/p"),
                    lambda: store.put("/p", b"during"),
                    lambda: store.create("/q", b""),
                    lambda: store.children("/"),
                    lambda: open_store(zk_url, operation_timeout_s=OP_TIMEOUT),
                ):
                    nursery.start_soon(fails, op)

        await trio.to_thread.run_sync(zk.start)
        value, _ = await _until_ok(lambda: store.get("/p"))
        assert value == b"before"
        # The session outlived the short outage, so its ephemeral node is still there.
        assert (await store.exists("/e")).ephemeral
        # The watch kazoo dropped with the connection is reported once we are back.
        events = await rec.wait_for(1)
        assert events[0].path == "/p"
        assert (await store.put("/p", b"after", 0)).version == 1
    finally:
        await store.close()


async def test_paused_server_times_out_then_recovers(restore_zk: ZooKeeperServer, zk_url: str) -> None:
    zk = restore_zk
    store = await open_store(zk_url, operation_timeout_s=OP_TIMEOUT, session_timeout_s=30.0)
    try:
        await store.put("/k", b"v")
        zk.pause()
        with trio.fail_after(GUARD):
            with pytest.raises(StoreUnavailableError):
                await store.get("/k")
        zk.resume()
        value, _ = await _until_ok(lambda: store.get("/k"))
        assert value == b"v"
    finally:
        zk.resume()
        await store.close()


async def test_killed_with_writes_in_flight(restore_zk: ZooKeeperServer, zk_url: str) -> None:
    zk = restore_zk
    store = await open_store(zk_url, operation_timeout_s=OP_TIMEOUT, session_timeout_s=30.0)
    acked: list[str] = []
    failed = 0
    try:
        await store.create("/w", b"")

        async def writer(i: int) -> None:
            nonlocal failed
            try:
                acked.append(await store.create(f"/w/n{i:04d}", b"x"))
            except StoreUnavailableError:
                failed += 1

        with trio.fail_after(GUARD + 10):
            async with trio.open_nursery() as nursery:
                # A burst of 1,000 requests while ZooKeeper dies: more than kazoo's wake-up
                # socketpair holds, which must not block the event loop.
                nursery.start_soon(trio.to_thread.run_sync, zk.kill)
                for i in range(1000):
                    nursery.start_soon(writer, i)
        assert len(acked) + failed == 1000
        await trio.to_thread.run_sync(zk.start)
        names = await _until_ok(lambda: store.children("/w"))
        # Every acknowledged create survived the SIGKILL of ZooKeeper (it fsyncs its log).
        assert {p.rsplit("/", 1)[1] for p in acked} <= set(names)
    finally:
        await store.close()
