"""Rack-aware placement: new ensembles and replacements avoid two replicas in one rack."""

from __future__ import annotations

import random

import pytest

import metadata
from bookie.client.client_context import ClientContext
from bookie.client.config import ClientConfig
from bookie.client.errors import BKNotEnoughBookiesError
from bookie.client.placement import RackAwarePlacementPolicy, load_policy

RACKS = {"a1:1": "/r1", "a2:1": "/r1", "b1:1": "/r2", "b2:1": "/r2", "c1:1": "/r3"}


@pytest.mark.parametrize("seed", range(20))
def test_new_ensemble_spreads_over_racks(seed):
    pol = RackAwarePlacementPolicy(random.Random(seed), racks=RACKS)
    ens = pol.new_ensemble(3, list(RACKS), set(), set())
    assert len({RACKS[b] for b in ens}) == 3  # three racks, one replica each
    two = pol.new_ensemble(2, ["a1:1", "a2:1", "b1:1", "b2:1"], set(), set())
    assert RACKS[two[0]] != RACKS[two[1]]
    # 4 of 5 bookies over 3 racks: consecutive positions (a write set of 2) never share a rack
    four = pol.new_ensemble(4, list(RACKS), set(), set())
    assert all(RACKS[four[i]] != RACKS[four[(i + 1) % 4]] for i in range(3))


@pytest.mark.parametrize("seed", range(20))
def test_replacement_prefers_an_unused_rack(seed):
    pol = RackAwarePlacementPolicy(random.Random(seed), racks=RACKS)
    ensemble = ["a1:1", "b1:1"]
    # b1 dies: a2 (rack r1, shared with a1) is worse than b2 or c1
    pick = pol.replace_bookie(ensemble, 1, ["a1:1", "a2:1", "b2:1", "c1:1"], {"b1:1"}, set())
    assert RACKS[pick] != "/r1"
    # when only the shared rack is left, it is used rather than failing
    assert pol.replace_bookie(ensemble, 1, ["a1:1", "a2:1"], {"b1:1"}, set()) == "a2:1"
    with pytest.raises(BKNotEnoughBookiesError):
        pol.replace_bookie(ensemble, 1, ["a1:1"], {"b1:1"}, set())


def test_no_racks_declared_is_random_placement():
    pol = RackAwarePlacementPolicy(random.Random(3))
    seen = {tuple(sorted(pol.new_ensemble(2, ["x:1", "y:1", "z:1"], set(), set()))) for _ in range(60)}
    assert len(seen) == 3  # every pair comes up
    assert isinstance(load_policy("rackaware"), RackAwarePlacementPolicy)
    assert ClientConfig().ensemble_placement_policy == "rackaware"


async def test_client_reads_declared_racks_from_the_store():
    store = await metadata.open_store("memory://")
    try:
        await store.put("/bookies/a1:1/rack", b"/r1", None, make_parents=True)
        await store.put("/bookies/b1:1/rack", b"/r2\n", None, make_parents=True)
        await store.create("/bookies/c1:1", b"", make_parents=True)  # no rack declared
        pol = RackAwarePlacementPolicy(random.Random(1))
        ctx = ClientContext(store, ClientConfig(), pol)
        await ctx.refresh_racks()
        assert pol.racks == {"a1:1": "/r1", "b1:1": "/r2"}
        assert pol.rack("c1:1") == "/default-rack"
    finally:
        await store.close()
