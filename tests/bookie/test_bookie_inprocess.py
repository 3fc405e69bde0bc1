"""In-process bookie tests over real sockets: adds, reads, fencing, LAC, restart recovery."""

from __future__ import annotations

from pathlib import Path

import trio

from bookie import entry_format
from bookie.bookie import Bookie
from bookie.protocol import Flag, Op, Status
from tests.bookie.helpers import MASTER_KEY, BookieClient, make_config


async def test_add_read_restart(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg)
        await b.start(nursery)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        for i in range(20):
            r = await c.add(1, i, b"x%d" % i)
            assert r.status == Status.OK, r
        r = await c.read(1, 5)
        assert r.status == Status.OK and entry_format.payload(r.body) == b"x5"
        r = await c.read(1, 50)
        assert r.status == Status.NO_ENTRY
        r = await c.read(2, 0)
        assert r.status == Status.NO_LEDGER
        await c.aclose()
        await b.close()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg)
        await b.start(nursery)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        for i in range(20):
            r = await c.read(1, i)
            assert r.status == Status.OK and entry_format.payload(r.body) == b"x%d" % i
        await b.close()
        nursery.cancel_scope.cancel()
