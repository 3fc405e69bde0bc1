"""Bundle handoff in the ownership cache: lookups wait for a dead or unloading owner's node to
go and are answered the moment it does; an assigner places unowned bundles elsewhere."""

from __future__ import annotations

import uuid
from typing import Any

import trio

from broker.names import NamespaceName, TopicName
from broker.ownership import OwnershipCache
from metadata import open_store, values

BOUNDARIES = ["0x00000000", "0xffffffff"]
TOPIC = TopicName.parse("persistent://public/default/t")
A = ("pulsar://127.0.0.1:6650", "http://127.0.0.1:8080")
B = ("pulsar://127.0.0.1:6651", "http://127.0.0.1:8081")


async def _dead(url: str) -> bool:
    return False


async def _alive(url: str) -> bool:
    return True


async def test_a_lookup_is_answered_when_a_dead_owners_node_vanishes() -> None:
    name = f"memory://handoff-{uuid.uuid4().hex}"
    sa, sb = await open_store(name), await open_store(name)
    assert (await OwnershipCache(sa, *A).owner(TOPIC, BOUNDARIES))["nativeUrl"] == A[0]
    b = OwnershipCache(sb, *B, wait_s=30, probe=_dead)
    answered: list[tuple[float, Any]] = []

    async def lookup() -> None:
        data = await b.owner(TOPIC, BOUNDARIES, wait=True)
        answered.append((trio.current_time(), data))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lookup)
        await trio.sleep(0.5)
        assert not answered  # held: the owner is dead but its node is still there
        expired_at = trio.current_time()
        await sa.expire()  # A's session expires: its node goes
    at, data = answered[0]
    assert data["nativeUrl"] == B[0] and at - expired_at < 1.0
    assert OwnershipCache.bundle_path(TOPIC.namespace_name, "0x00000000_0xffffffff") in b.owned


async def test_a_live_owner_is_answered_at_once_and_a_dead_one_after_the_bound() -> None:
    name = f"memory://handoff-{uuid.uuid4().hex}"
    sa, sb = await open_store(name), await open_store(name)
    await OwnershipCache(sa, *A).owner(TOPIC, BOUNDARIES)
    with trio.fail_after(0.5):
        assert (await OwnershipCache(sb, *B, probe=_alive).owner(TOPIC, BOUNDARIES, wait=True))["nativeUrl"] == A[0]
    start = trio.current_time()
    assert (await OwnershipCache(sb, *B, wait_s=0.3, probe=_dead).owner(TOPIC, BOUNDARIES, wait=True))["nativeUrl"] == A[0]
    assert trio.current_time() - start >= 0.3  # waited for the node, then redirected anyway
    with trio.fail_after(0.5):  # without wait (topic loads, admin calls): answered at once
        assert (await OwnershipCache(sb, *B, wait_s=30, probe=_dead).owner(TOPIC, BOUNDARIES))["nativeUrl"] == A[0]


async def test_an_unloading_bundle_is_marked_disabled_and_lookups_wait_for_its_release() -> None:
    name = f"memory://handoff-{uuid.uuid4().hex}"
    sa, sb = await open_store(name), await open_store(name)
    a = OwnershipCache(sa, *A)
    await a.owner(TOPIC, BOUNDARIES)
    path = a.path(TOPIC, BOUNDARIES)
    await a.disable(path)
    raw, _ = await sb.get(path)
    assert values.unpack(raw)["disabled"] is True
    b = OwnershipCache(sb, *B, wait_s=30, probe=_alive)
    got: list[Any] = []

    async def lookup(cache: OwnershipCache) -> None:
        got.append((await cache.owner(TOPIC, BOUNDARIES, wait=True))["nativeUrl"])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lookup, b)
        nursery.start_soon(lookup, a)  # the unloading broker's own lookups wait too
        await trio.sleep(0.3)
        assert got == []
        await a.release(path)
    assert len(got) == 2 and len(set(got)) == 1  # one of them acquired it, the other was told so


async def test_an_assigner_places_an_unowned_bundle_on_another_broker() -> None:
    store = await open_store(f"memory://handoff-{uuid.uuid4().hex}")
    cache = OwnershipCache(store, *A)
    asked: list[tuple[NamespaceName, str]] = []

    async def elsewhere(ns: NamespaceName, bundle: str) -> dict[str, Any] | None:
        asked.append((ns, bundle))
        return {"nativeUrl": B[0], "httpUrl": B[1], "assigned": True}

    data = await cache.owner(TOPIC, BOUNDARIES, assign=elsewhere)
    assert data is not None and data["nativeUrl"] == B[0] and not cache.owned
    assert await store.exists(cache.path(TOPIC, BOUNDARIES)) is None  # B acquires it when asked
    assert asked == [(TOPIC.namespace_name, "0x00000000_0xffffffff")]

    async def here(ns: NamespaceName, bundle: str) -> dict[str, Any] | None:
        return None

    assert (await cache.owner(TOPIC, BOUNDARIES, assign=here))["nativeUrl"] == A[0]
