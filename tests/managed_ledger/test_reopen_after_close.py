"""The factory never hands out a managed ledger that is closing or closed.

The chaos finding (a 30-minute cluster run, seed 21, on 65c4c2f): after a broker's topic was
fenced, its close of the managed ledger outlived the topic's 10 s bound (bookies faulty): the
close was cancelled after it had set the ledger CLOSED but before it told the factory, so the
factory kept returning that closed ledger. Every later load of the topic on that broker got
it, and every PRODUCER and SUBSCRIBE failed with ManagedLedgerClosedError for the remaining
25 minutes of the run. A reopen during a close that is still going must likewise wait for it
and open afresh, not get the ledger being closed.
"""

from __future__ import annotations

import trio

from managed_ledger import ManagedLedgerFactory
from tests.managed_ledger.fake_bk import FakeBookies

NAME = "t/ns/persistent/reopen"


async def test_a_close_cut_short_leaves_no_closed_ledger_behind(factory: ManagedLedgerFactory, bookies: FakeBookies) -> None:
    ml = await factory.open(NAME)
    await ml.add_entry(b"a")
    bookies.close_gate = trio.Event()  # closing the current ledger hangs (slow metadata store)
    with trio.move_on_after(0.2):
        await ml.close()  # the caller gives up on it, as topic.close does after 10 s
    bookies.close_gate.set()
    again = await factory.open(NAME)
    assert again is not ml
    await again.add_entry(b"b")
    cursor = await again.open_cursor("c", "earliest")
    assert [e.data for e in await cursor.read_entries(10)] == [b"a", b"b"]


async def test_an_open_during_a_close_waits_for_it_and_opens_afresh(factory: ManagedLedgerFactory, bookies: FakeBookies) -> None:
    ml = await factory.open(NAME)
    await ml.add_entry(b"a")
    bookies.close_gate = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ml.close)
        await trio.sleep(0.05)  # the close is under way, held at the ledger's close
        opened: list = []

        async def reopen() -> None:
            opened.append(await factory.open(NAME))

        nursery.start_soon(reopen)
        await trio.sleep(0.05)
        assert not opened  # waits for the close rather than returning the closing ledger
        bookies.close_gate.set()
    (again,) = opened
    assert again is not ml
    await again.add_entry(b"b")
    cursor = await again.open_cursor("c", "earliest")
    assert [e.data for e in await cursor.read_entries(10)] == [b"a", b"b"]
