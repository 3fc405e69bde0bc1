"""Placement (discovery, exclusions, pluggable policy) and ClientConfig loading."""

from __future__ import annotations

import random

import pytest

from bookie.client import BKNotEnoughBookiesError, BookKeeper, ClientConfig
from bookie.client.placement import RandomPlacementPolicy, load_policy
from bookie.protocol import Status
from tests.bookie.client.conftest import fast_config


def test_random_policy_prefers_healthy_and_excludes():
    pol = RandomPlacementPolicy(random.Random(1))
    writable = ["a:1", "b:1", "c:1", "d:1"]
    for _ in range(20):
        ens = pol.new_ensemble(3, writable, set(), {"d:1"})
        assert sorted(ens) == ["a:1", "b:1", "c:1"]  # the quarantined one only when needed
    assert "d:1" in pol.new_ensemble(4, writable, set(), {"d:1"})
    with pytest.raises(BKNotEnoughBookiesError):
        pol.new_ensemble(3, writable, {"a:1", "b:1"}, set())
    assert pol.replace_bookie(["a:1", "b:1", "c:1"], 1, writable, {"b:1"}, set()) == "d:1"
    with pytest.raises(BKNotEnoughBookiesError):
        pol.replace_bookie(["a:1", "b:1", "c:1"], 1, writable, {"b:1", "d:1"}, set())


class FirstBookies:
    """A deterministic policy, loaded by name."""

    def new_ensemble(self, ensemble_size, writable, exclude, quarantined):
        return sorted(b for b in writable if b not in exclude)[:ensemble_size]

    def replace_bookie(self, ensemble, index, writable, exclude, quarantined):
        return sorted(b for b in writable if b not in exclude and b not in ensemble)[0]


async def test_discovery_skips_readonly_and_policy_is_pluggable(store, cluster):
    ro = await cluster.add_bookie()
    await cluster.unregister(ro)
    await store.create(f"/ledgers/available/readonly/{ro.bookie_id}", b"", make_parents=True)
    cfg = fast_config(ensemble_placement_policy=f"{__name__}:FirstBookies")
    async with BookKeeper(store, cfg) as bk:
        assert isinstance(bk.placement, FirstBookies)
        assert sorted(await bk.writable_bookies()) == sorted(b for b in cluster.bookies if b != ro.bookie_id)
        lh = await bk.create_ledger(3, 2, 2)
        assert ro.bookie_id not in lh.metadata.last_ensemble
        assert list(lh.metadata.last_ensemble) == sorted(lh.metadata.last_ensemble)
        with pytest.raises(BKNotEnoughBookiesError):
            await bk.create_ledger(4, 2, 2)


async def test_failed_bookies_are_kept_out_of_new_ensembles(store, cluster):
    """A bookie that failed an add (known bad, quarantined) is not chosen for new ledgers or
    replacements while enough healthy bookies exist."""
    await cluster.add_bookie()
    async with BookKeeper(store, fast_config()) as bk:
        lh = await bk.create_ledger(3, 3, 3)
        bad = lh.metadata.last_ensemble[0]
        cluster[bad].faults.add_status = Status.IO
        assert await lh.add_entry(b"x") == 0  # completes after an ensemble change away from it
        assert bad not in lh.metadata.last_ensemble and bad in bk.quarantined()
        for _ in range(10):  # 4 bookies, 3 per ensemble: chance alone would pick it 3 times in 4
            assert bad not in (await bk.create_ledger(3, 2, 2)).metadata.last_ensemble


def test_load_policy_errors():
    assert isinstance(load_policy("random"), RandomPlacementPolicy)
    with pytest.raises(ValueError):
        load_policy("no_colon_here")


def test_config_from_toml(tmp_path):
    path = tmp_path / "client.toml"
    path.write_text("[bookkeeper_client]\nadd_entry_timeout_s = 2.5\nthrottle = 100\n")
    cfg = ClientConfig.from_toml(path, table="bookkeeper_client")
    assert cfg.add_entry_timeout_s == 2.5 and cfg.throttle == 100
    assert cfg.read_timeout_s == 5.0 and cfg.first_speculative_read_timeout_ms == 2000
    path.write_text("bogus_key = 1\n")
    with pytest.raises(ValueError):
        ClientConfig.from_toml(path)
