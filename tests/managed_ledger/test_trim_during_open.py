"""No trim while the managed ledger is still recovering its cursors: a trim then sees only the
cursors recovered so far (or none: "no durable cursor", everything but the current ledger
goes) and would delete ledgers a cursor not yet recovered still has to read. Found by the
cluster chaos run (a subscription lost acknowledged messages after a slow reopen)."""

from __future__ import annotations

import trio

from managed_ledger import ManagedLedgerFactory
from tests.managed_ledger.fake_store import FakeStore

NAME = "t/ns/persistent/slow-open"


class SlowCursorReads(FakeStore):
    """Reading a cursor node takes a while (a slow metadata store, a cursor ledger on a bookie
    that is down): long enough for the periodic trim to come round."""

    async def get(self, path, watch=None):  # type: ignore[no-untyped-def]
        if path.endswith("/s"):
            await trio.sleep(0.5)
        return await super().get(path, watch)


async def test_no_trim_before_the_cursors_are_recovered(meta, bookies, config) -> None:
    cfg = config.replace(max_entries_per_ledger=4, retention_check_interval_seconds=0.05)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as factory:
        ml = await factory.open(NAME)
        await ml.open_cursor("s", "earliest")
        for _ in range(10):
            await ml.add_entry(b"x" * 100)
        before = [li.ledger_id for li in ml.ledgers]
        await ml.close()
    async with ManagedLedgerFactory(SlowCursorReads(meta), bookies.client(), cfg) as factory:
        ml = await factory.open(NAME)
        assert [li.ledger_id for li in ml.ledgers][:len(before)] == before  # nothing trimmed
        assert ml.cursors["s"].number_of_entries_in_backlog == 10
        assert all(lid in bookies.ledgers for lid in before)  # none deleted at the bookies either
        await ml.close()
