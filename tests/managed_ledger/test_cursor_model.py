"""Randomised cursor operations checked against a plain model (fake ledger client)."""

from __future__ import annotations

import random

import pytest

from managed_ledger import ManagedLedgerFactory, Position
from tests.managed_ledger.fake_bk import FakeBookies
from tests.managed_ledger.fake_store import FakeMetadataServer


@pytest.mark.parametrize("seed", range(12))
async def test_random_acks_match_model(seed: int, config) -> None:
    rng = random.Random(seed)
    meta, bookies = FakeMetadataServer(), FakeBookies()
    cfg = config.replace(max_entries_per_ledger=rng.choice([3, 5, 50]), retention_time_minutes=-1, retention_size_mb=-1)
    positions: list[Position] = []
    acked: set[Position] = set()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open("t/ns/persistent/model")
        c = await ml.open_cursor("s", "earliest")
        for _ in range(120):
            op = rng.random()
            if op < 0.4 or not positions:
                positions.append(await ml.add_entry(b"%d" % len(positions)))
            elif op < 0.75:
                picks = rng.sample(positions, min(len(positions), rng.randint(1, 4)))
                await c.delete(picks)
                acked.update(picks)
            elif op < 0.85:
                p = rng.choice(positions)
                await c.mark_delete(p)
                acked.update(q for q in positions if q <= p)
            else:
                target = rng.choice(positions)
                await c.reset_cursor(target)  # everything from target on is unacked again
                acked = {q for q in positions if q < target}
            unacked = [p for p in positions if p not in acked]
            assert c.number_of_entries_in_backlog == len(unacked)
            md_model = max((p for p in positions if all(q in acked for q in positions if q <= p)), default=None)
            if md_model is not None:
                assert c.mark_delete_position == md_model
        # everything not acknowledged is read back, in order, after a restart too
        got = []
        while batch := await c.read_entries(7):
            got.extend(e.position for e in batch)
        assert set(got) <= {p for p in positions if p not in acked}
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open("t/ns/persistent/model")
        c = ml.cursors["s"]
        got = []
        while batch := await c.read_entries(7):
            got.extend(e.position for e in batch)
        assert got == [p for p in positions if p not in acked]
        assert c.number_of_entries_in_backlog == len(got)
