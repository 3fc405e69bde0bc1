"""Read-ahead and entry cache bypass of a cursor far behind (fake ledger client)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from managed_ledger import Position
from tests.managed_ledger.fake_bk import FakeLedgerHandle

NAME = "t/ns/persistent/ra"


@pytest.fixture
def bk_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every (first, last) the managed ledger asks the ledger client for."""
    reads: list[tuple[int, int]] = []
    for name in ("read", "read_unconfirmed"):
        orig = getattr(FakeLedgerHandle, name)

        async def counted(self: FakeLedgerHandle, first: int, last: int, orig=orig):
            reads.append((first, last))
            return await orig(self, first, last)

        monkeypatch.setattr(FakeLedgerHandle, name, counted)
    return reads


async def test_a_cursor_far_behind_keeps_reads_ahead(factory, config, bk_reads) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=1000))
    c = await ml.open_cursor("s", "earliest")
    ps = [await ml.add_entry(b"e%d" % i) for i in range(600)]
    lid = ps[0].ledger_id
    ml.cache.clear()  # far behind: nothing of it in the entry cache
    assert [e.position for e in await c.read_entries(100)] == ps[:100]
    assert bk_reads == [(0, 99)]
    c.read_ahead(200)  # one ledger-client read for the whole range ahead
    await trio.testing.wait_all_tasks_blocked()
    assert bk_reads == [(0, 99), (100, 299)] and c._ahead.pending == (lid, 100, 299)
    c.read_ahead(200)  # enough is ahead: nothing more
    await trio.testing.wait_all_tasks_blocked()
    assert len(bk_reads) == 2
    # reads take what was read ahead (no read of their own)
    got = await c.read_entries(100)
    assert [e.position for e in got] == ps[100:200] and [e.data for e in got] == [b"e%d" % i for i in range(100, 200)]
    c.read_ahead(200)  # 100 still ahead: half of 200, enough
    assert [e.position for e in await c.read_entries(40)] == ps[200:240]
    assert len(bk_reads) == 2 and c._ahead.pending == (lid, 240, 299)
    c.read_ahead(200)  # 60 ahead: the next range is read after them
    await trio.testing.wait_all_tasks_blocked()
    assert bk_reads[-1] == (300, 439) and c._ahead.pending == (lid, 240, 439)
    # one read spanning both reads ahead takes from both
    assert [e.position for e in await c.read_entries(150)] == ps[240:390]
    assert len(bk_reads) == 3 and c._ahead.pending == (lid, 390, 439) and c._ahead.used == 4
    # a seek elsewhere: what was read ahead is dropped, the read goes to the ledger client
    await c.seek(ps[10])
    assert [e.position for e in await c.read_entries(5)] == ps[10:15]
    assert bk_reads[-1] == (10, 14) and c._ahead.pending is None
    # a read ahead cancelled by a close
    c.read_ahead(200)
    assert c._ahead.pending == (lid, 15, 214)
    # nothing read from the bookies went into the entry cache
    assert ml.cache.count == 0
    await c.close()
    assert c._ahead.pending is None


async def test_catch_up_reads_bypass_the_entry_cache_and_leave_the_tail(factory, config, bk_reads) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=1000))
    behind = await ml.open_cursor("behind", "earliest")
    ps = [await ml.add_entry(b"old%d" % i) for i in range(200)]
    ml.cache.clear()
    tailing = await ml.open_cursor("tailing", "latest")
    tail = [await ml.add_entry(b"new%d" % i) for i in range(20)]  # written now: cached for the tailing reader
    assert ml.cache.count == 20
    got: list[Position] = []
    while len(got) < 200:
        batch = await behind.read_entries(min(30, 200 - len(got)))
        behind.read_ahead(60)
        got += [e.position for e in batch]
    assert got == ps
    assert behind._ahead.used >= 5  # reads after the first came from the reads ahead
    assert ml.cache.count == 20 and all(ml.cache.contains(p.ledger_id, p.entry_id) for p in tail)
    n = len(bk_reads)
    assert [e.data for e in await tailing.read_entries(20)] == [b"new%d" % i for i in range(20)]
    # caught up with the cached tail: read from the cache, nothing read ahead
    assert [e.position for e in await behind.read_entries(20)] == tail
    behind.read_ahead(60)
    assert len(bk_reads) == n and behind._ahead.pending is None


async def test_a_read_ahead_goes_on_into_the_next_ledgers(factory, config, bk_reads) -> None:
    """A range ahead that reaches the end of a ledger goes on in the next ones (one read per
    ledger): a reader far behind does not stall at each ledger boundary."""
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=100))
    c = await ml.open_cursor("s", "earliest")
    ps = [await ml.add_entry(b"e%d" % i) for i in range(330)]
    ledgers = sorted({p.ledger_id for p in ps})
    assert len(ledgers) == 4
    ml.cache.clear()
    assert [e.position for e in await c.read_entries(60)] == ps[:60]
    bk_reads.clear()
    c.read_ahead(250)  # 40 left in the first ledger, then 100 + 100, then 10 of the fourth
    await trio.testing.wait_all_tasks_blocked()
    assert sorted(bk_reads) == [(0, 9), (0, 99), (0, 99), (60, 99)]  # run concurrently
    assert c._ahead.entries == 250
    got = []
    while len(got) < 250:
        got += [e.position for e in await c.read_entries(50)]
    assert got == ps[60:310] and len(bk_reads) == 4  # every read came from what was read ahead
    assert ml.cache.count == 0
    await c.close()
