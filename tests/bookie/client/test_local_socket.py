"""A co-located bookie is reached over the abstract Unix socket it advertises (quire/local_socket.py);
a bookie without one, or whose socket is not on this host, over TCP."""

from __future__ import annotations

import trio

from bookie.client import BookKeeper, LedgerState
from metadata.values import pack, unpack
from tests.bookie.client.conftest import fast_config
from tests.bookie.client.real_cluster import client_config as _config
from tests.bookie.client.real_cluster import start_bookies, wait_registered, zk_store  # noqa: F401  (fixture)


async def _registration(store, bookie_id: str) -> dict:
    data, _ = await store.get(f"/ledgers/available/{bookie_id}")
    return unpack(data)


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
            while (await _registration(zk_store, local.bookie_id)).get("local_socket") in (None, first):
                await trio.sleep(0.1)  # the old session's node until the new one replaces it
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
