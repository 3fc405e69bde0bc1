"""A co-located bookie is reached over the abstract Unix socket it advertises (quire/local_socket.py);
a bookie without one, or whose socket is not on this host, over TCP."""

from __future__ import annotations

import trio

from bookie.client import BookKeeper, LedgerState
from bookie.client.bookie_connection import BookieConnection
from bookie.client.distribution import CLIENT_CONNECTION_LOST, CLIENT_TIMEOUT
from bookie.protocol import Op, Request
from metadata.errors import NotFoundError
from metadata.values import pack, unpack
from quire import local_socket
from tests.bookie.client.conftest import fast_config
from tests.bookie.client.fake_bookie import FakeBookie
from tests.bookie.client.real_cluster import client_config as _config
from tests.bookie.client.real_cluster import start_bookies, wait_registered, zk_store  # noqa: F401  (fixture)


async def _registration(store, bookie_id: str) -> dict:
    data, _ = await store.get(f"/ledgers/available/{bookie_id}")
    return unpack(data)


async def _registration_if_any(store, bookie_id: str) -> dict:
    """The registration, or {} between the old session's node going and the new one coming."""
    try:
        return await _registration(store, bookie_id)
    except NotFoundError:
        return {}


async def test_local_bookies_are_reached_over_their_unix_socket(zk_store, zk_url, quire_procs, tmp_path):
    """Two real bookies, one with local_socket_enabled = false: E=WQ=AQ=2 adds reach the first
    over its advertised Unix socket, the second over TCP; every entry reads back; after a
    SIGKILL and restart the first advertises a new socket and the client reconnects there."""
    local, = await start_bookies(quire_procs, zk_url, tmp_path / "a", 1, zk_store)
    tcp_only, = await start_bookies(quire_procs, zk_url, tmp_path / "b", 1, zk_store,
                                    ("--set", "local_socket_enabled=false"))
    first = (await _registration(zk_store, local.bookie_id))["local_socket"]
    assert first.startswith("quire-bookie-")
    assert "local_socket" not in await _registration(zk_store, tcp_only.bookie_id)
    async with BookKeeper(zk_store, _config()) as bk:
        lh = await bk.create_ledger(2, 2, 2, password=b"pw")
        for i in range(20):
            assert await lh.add_entry(b"e%d" % i) == i
        conns = bk.ctx._pool._conns  # type: ignore[union-attr]
        assert conns[local.bookie_id].transport == "unix"
        assert conns[tcp_only.bookie_id].transport == "tcp"
        assert [e.data for e in await lh.read(0, 19)] == [b"e%d" % i for i in range(20)]

        await local.restart()
        await wait_registered(zk_store, {local.bookie_id})
        with trio.fail_after(30):
            while (await _registration_if_any(zk_store, local.bookie_id)).get("local_socket") in (None, first):
                await trio.sleep(0.1)  # the old session's node (or none) until the new one replaces it
        # The old connection broke: the next add reconnects (the new socket), or the handle
        # replaced the bookie; either way, nothing acknowledged is lost.
        for i in range(20, 40):
            assert await lh.add_entry(b"e%d" % i) == i
        if local.bookie_id in lh.metadata.last_ensemble:
            assert conns[local.bookie_id].transport == "unix"
        await lh.close()
        assert lh.metadata.state == LedgerState.CLOSED
        rh = await bk.open_ledger(lh.ledger_id, password=b"pw", recovery=False)
        assert [e.data for e in await rh.read(0, 39)] == [b"e%d" % i for i in range(40)]


async def test_a_socket_not_on_this_host_falls_back_to_tcp(store, cluster):
    """A registration naming a Unix socket nobody here listens on (another host's bookie):
    the connection uses TCP and the adds are acknowledged."""
    for bookie_id in cluster.bookies:
        await store.put(f"/ledgers/available/{bookie_id}", pack({"local_socket": f"quire-bookie-elsewhere-{bookie_id}"}),
                        None)
    async with BookKeeper(store, fast_config()) as bk:
        lh = await bk.create_ledger(3, 2, 2)
        for i in range(10):
            assert await lh.add_entry(b"x%d" % i) == i
        transports = {b: c.transport for b, c in bk.ctx._pool._conns.items()}  # type: ignore[union-attr]
        assert set(transports.values()) == {"tcp"} and len(transports) == 3


async def _answered(conn: BookieConnection) -> bool:
    """A request gets the bookie's answer (whatever it is), not a connection failure."""
    done = trio.Event()
    got: list[int] = []

    def cb(status: int, _resp: object) -> None:
        got.append(status)
        done.set()

    conn.send(Request(Op.READ_LAC, 0, ledger_id=1), cb, 5.0)
    with trio.fail_after(10):
        await done.wait()
    return got[0] not in (CLIENT_CONNECTION_LOST, CLIENT_TIMEOUT)


async def test_a_reconnect_tries_the_last_socket_before_reading_the_registration(nursery):
    """A broken connection reconnects to the socket that worked last without a registration
    read (the store may be down); once that socket is gone (the bookie restarted) it reads the
    registration again and finds the new one; a registration read that hangs means TCP."""
    fb = FakeBookie()
    await fb.start(nursery)
    served: list[trio.SocketStream] = []

    async def handle(stream: trio.SocketStream) -> None:
        served.append(stream)
        await fb._handle(stream)

    async def serve(name: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listener = await local_socket.listen(name)
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await trio.serve_listeners(handle, [listener])

    first, second = local_socket.new_name("test"), local_socket.new_name("test")
    first_scope = await nursery.start(serve, first)
    await nursery.start(serve, second)
    names = [first]
    lookups = 0

    async def resolve(bookie_id: str) -> str | None:
        nonlocal lookups
        lookups += 1
        if not names:
            await trio.sleep_forever()  # the store does not answer
        return names[0]

    conn = BookieConnection(fb.bookie_id, nursery, fast_config(), resolve_local=resolve)
    try:
        assert await _answered(conn)
        assert (conn.transport, lookups) == ("unix", 1)
        names.clear()  # from here the registration cannot be read
        for s in served:
            await trio.aclose_forcefully(s)  # the connection breaks, the listener stays
        while conn.outstanding or conn._running:
            await trio.sleep(0.01)
        assert await _answered(conn)
        assert (conn.transport, lookups) == ("unix", 1)  # the same socket, no registration read

        names.append(second)
        first_scope.cancel()  # the bookie "restarted": the first socket is gone
        while conn._running:
            await trio.sleep(0.01)
        assert await _answered(conn)
        assert (conn.transport, lookups) == ("unix", 2)
    finally:
        conn.close()

    stuck = BookieConnection(fb.bookie_id, nursery, fast_config(), resolve_local=resolve)
    names.clear()
    try:
        assert await _answered(stuck)  # after the lookup's bound, over TCP
        assert stuck.transport == "tcp"
    finally:
        stuck.close()


async def test_the_registration_lookup(store):
    """``ClientContext.local_socket`` reads the writable or the read-only registration; none
    advertised, none registered, or a value it cannot read: None (TCP)."""
    async with BookKeeper(store, fast_config()) as bk:
        ctx = bk.ctx
        await store.put("/ledgers/available/a:1", pack({"bookie_id": "a:1", "local_socket": "quire-bookie-1-aa"}), None,
                        make_parents=True)
        await store.put("/ledgers/available/readonly/b:2", pack({"local_socket": "quire-bookie-2-bb"}), None,
                        make_parents=True)
        await store.put("/ledgers/available/c:3", pack({"bookie_id": "c:3"}), None)
        await store.put("/ledgers/available/d:4", b"", None)  # a registration without a value
        await store.put("/ledgers/available/e:5", pack({"local_socket": 7}), None)
        assert await ctx.local_socket("a:1") == "quire-bookie-1-aa"
        assert await ctx.local_socket("b:2") == "quire-bookie-2-bb"
        for bookie_id in ("c:3", "d:4", "e:5", "f:6"):
            assert await ctx.local_socket(bookie_id) is None
