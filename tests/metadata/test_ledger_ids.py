"""Ledger ids: BookKeeper's hierarchical layout, ordered listing and unique allocation."""

from __future__ import annotations

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import MetadataStore, open_store
from metadata.ledger_ids import (
    MAX_LEDGER_ID,
    allocate_ledger_id,
    iter_ledger_ids,
    ledger_id_from_path,
    ledger_path,
)
from tests.metadata.conftest import Backend

EXAMPLES = [
    (0, "/ledgers/00/0000/L0000"),
    (1, "/ledgers/00/0000/L0001"),
    (1234567890, "/ledgers/12/3456/L7890"),
    (2**31 - 2, "/ledgers/21/4748/L3646"),
    (2**31 - 1, "/ledgers/000/0000/0021/4748/L3647"),
    (2**31, "/ledgers/000/0000/0021/4748/L3648"),
    (MAX_LEDGER_ID, "/ledgers/922/3372/0368/5477/L5807"),
]


@pytest.mark.parametrize(("ledger_id", "path"), EXAMPLES)
def test_layout_examples(ledger_id: int, path: str) -> None:
    assert ledger_path(ledger_id) == path
    assert ledger_id_from_path(path) == ledger_id


@given(st.integers(min_value=0, max_value=MAX_LEDGER_ID))
def test_layout_round_trip(ledger_id: int) -> None:
    assert ledger_id_from_path(ledger_path(ledger_id)) == ledger_id


@pytest.mark.parametrize("bad", [-1, MAX_LEDGER_ID + 1, "1", True, 1.0])
def test_bad_ids(bad: object) -> None:
    with pytest.raises(ValueError):
        ledger_path(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "/ledgers/00/0000/0001",  # leaf without L
        "/ledgers/00/000/L0001",  # wrong width
        "/other/00/0000/L0001",  # wrong root
        "/ledgers/21/4748/L3647",  # 2^31-1 belongs to the long layout
        "/ledgers/000/0000/0000/0000/L0001",  # small id spelled long
        "/ledgers/0a/0000/L0001",
        "/ledgers/available",
        "/ledgers/00/0000/L0001/extra",
    ],
)
def test_bad_paths(bad: str) -> None:
    with pytest.raises(ValueError):
        ledger_id_from_path(bad)


async def test_ordered_listing_skips_non_ledger_nodes(store: MetadataStore) -> None:
    ids = [2**31 + 5, 7, 0, 10_000_123, 2**31 - 2, 2**40, 99, 2**31 - 1, 123_456_789]
    for ledger_id in ids:
        await store.create(ledger_path(ledger_id), b"meta", make_parents=True)
    for other in (
        "/ledgers/available/readonly/127.0.0.1:3181",
        "/ledgers/cookies/127.0.0.1:3181",
        "/ledgers/idgen/x",
        "/ledgers/INSTANCEID",
        "/ledgers/LAYOUT",
        "/ledgers/underreplication/ledgers",
        "/ledgers/00/0000/not-a-ledger",
        "/ledgers/00/junk",
    ):
        await store.create(other, b"", make_parents=True)
    assert [i async for i in iter_ledger_ids(store)] == sorted(ids)
    await store.delete(ledger_path(7))
    assert 7 not in [i async for i in iter_ledger_ids(store)]


async def test_listing_empty_store(store: MetadataStore) -> None:
    assert [i async for i in iter_ledger_ids(store)] == []


async def test_allocation_unique_across_sessions(backend: Backend) -> None:
    s1, s2 = await backend.open(), await backend.open()
    got: list[int] = []

    async def allocate(store: MetadataStore) -> None:
        for _ in range(10):
            got.append(await allocate_ledger_id(store))

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(allocate, s1 if i % 2 else s2)
    assert len(got) == len(set(got)) == 80
    assert await s1.children("/ledgers/idgen") == []


async def test_long_id_generator_after_switch(store: MetadataStore) -> None:
    short = await allocate_ledger_id(store)
    assert 0 <= short < 2**31 - 1
    # The persistent switch BookKeeper flips when the 32-bit ZooKeeper sequence runs out.
    await store.create("/ledgers/idgen-long", b"")
    ids = [await allocate_ledger_id(store) for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert all(i >> 32 == 1 for i in ids)
    assert ledger_path(ids[0]).count("/") == 6  # long layout
    # Allocation uses the highest HOB (the next one is created when a HOB is used up).
    await store.create("/ledgers/idgen-long/HOB-0000000002", b"")
    assert (await allocate_ledger_id(store)) >> 32 == 2
    assert await store.children("/ledgers/idgen-long/HOB-0000000001") == []


ids_strategy = st.sets(
    st.one_of(
        st.integers(0, 20_000),
        st.integers(2**31 - 50, 2**31 + 50),  # around the short/long layout boundary
        st.integers(0, MAX_LEDGER_ID),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(ids_strategy)
def test_listing_is_sorted_for_any_ids(ids: set[int]) -> None:
    async def check() -> list[int]:
        store = await open_store("memory://")
        try:
            for ledger_id in ids:
                await store.create(ledger_path(ledger_id), b"", make_parents=True)
            return [i async for i in iter_ledger_ids(store)]
        finally:
            await store.close()

    assert trio.run(check) == sorted(ids)
