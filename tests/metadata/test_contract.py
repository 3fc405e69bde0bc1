"""The MetadataStore contract, run unchanged against memory, embedded RocksDB and ZooKeeper."""

from __future__ import annotations

import pytest
import trio

from metadata import EventType, MetadataStore, WatchEvent
from metadata.errors import (
    AlreadyExistsError,
    BadVersionError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NotEmptyError,
    NotFoundError,
    SessionLostError,
    ValueTooLargeError,
)
from metadata.store import MAX_VALUE_SIZE
from tests.metadata.conftest import Backend


class Recorder:
    """A watch callback that records events and lets a test wait for them."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._changed = trio.Event()

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, count: int, timeout: float = 20.0) -> list[WatchEvent]:
        with trio.fail_after(timeout):
            while len(self.events) < count:
                await self._changed.wait()
        return self.events

    async def settle(self) -> None:
        """Give late (wrong) extra events a chance to show up before asserting on counts."""
        await trio.sleep(0.3)


async def test_create_get_versions_and_stat(store: MetadataStore) -> None:
    assert await store.create("/a", b"one") == "/a"
    value, stat = await store.get("/a")
    assert (value, stat.version, stat.ephemeral, stat.num_children) == (b"one", 0, False, 0)
    stat1 = await store.put("/a", b"two")
    assert stat1.version == 1 and stat1.mtime_ms >= stat.ctime_ms
    await store.create("/a/b", b"")
    value, stat = await store.get("/a")
    assert (value, stat.version, stat.num_children) == (b"two", 1, 1)
    assert (await store.exists("/a/b")).version == 0
    assert await store.exists("/nope") is None
    with pytest.raises(NotFoundError):
        await store.get("/nope")


async def test_compare_and_set(store: MetadataStore) -> None:
    assert (await store.put("/cas", b"v0", -1)).version == 0  # -1: must not exist
    with pytest.raises(AlreadyExistsError):
        await store.put("/cas", b"again", -1)
    assert (await store.put("/cas", b"v1", 0)).version == 1
    with pytest.raises(BadVersionError):
        await store.put("/cas", b"stale writer", 0)
    assert await store.get("/cas") == (b"v1", (await store.get("/cas"))[1])
    assert (await store.get("/cas"))[0] == b"v1"
    with pytest.raises(NotFoundError):
        await store.put("/missing", b"x", 3)
    assert (await store.put("/cas", b"v2")).version == 2  # None: unconditional


async def test_cas_race_exactly_one_winner(backend: Backend) -> None:
    s1, s2 = await backend.open(), await backend.open()
    await s1.put("/race", b"start")
    outcomes: list[str] = []

    async def writer(store: MetadataStore, tag: bytes) -> None:
        try:
            await store.put("/race", tag, 0)
            outcomes.append("won")
        except BadVersionError:
            outcomes.append("lost")

    async with trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(writer, s1 if i % 2 else s2, b"w%d" % i)
    assert sorted(outcomes) == ["lost"] * 5 + ["won"]
    assert (await s1.get("/race"))[1].version == 1


async def test_create_rules(store: MetadataStore) -> None:
    await store.create("/x", b"1")
    with pytest.raises(AlreadyExistsError):
        await store.create("/x", b"2")
    with pytest.raises(NotFoundError):
        await store.create("/no/parent", b"")
    assert await store.create("/deep/er/node", b"v", make_parents=True) == "/deep/er/node"
    assert (await store.get("/deep/er"))[0] == b""
    assert (await store.put("/p1/p2", b"v", make_parents=True)).version == 0
    with pytest.raises(NotFoundError):
        await store.put("/q1/q2", b"v")


async def test_delete_with_version(store: MetadataStore) -> None:
    await store.create("/d", b"")
    await store.put("/d", b"x")
    with pytest.raises(BadVersionError):
        await store.delete("/d", 0)
    await store.create("/d/child", b"")
    with pytest.raises(NotEmptyError):
        await store.delete("/d", 1)
    await store.delete("/d/child")
    await store.delete("/d", 1)
    assert await store.exists("/d") is None
    with pytest.raises(NotFoundError):
        await store.delete("/d")
    await store.create("/tree/a/b", make_parents=True)
    await store.create("/tree/c", b"")
    await store.delete_recursive("/tree")
    assert await store.exists("/tree") is None


async def test_sequential_ordering_under_concurrency(backend: Backend) -> None:
    s1, s2 = await backend.open(), await backend.open()
    await s1.create("/seq", b"")
    per_task: dict[int, list[str]] = {}

    async def creator(task: int, store: MetadataStore) -> None:
        mine = per_task.setdefault(task, [])
        for _ in range(10):
            mine.append(await store.create("/seq/n-", b"", sequential=True, ephemeral=task % 3 == 0))

    async with trio.open_nursery() as nursery:
        for task in range(12):
            nursery.start_soon(creator, task, s1 if task % 2 else s2)
    created = [p for lst in per_task.values() for p in lst]
    assert len(set(created)) == 120
    for lst in per_task.values():  # a task's own creates get increasing suffixes
        assert lst == sorted(lst)
        assert all(len(p.rsplit("-", 1)[1]) == 10 for p in lst)
    assert await s1.children("/seq") == sorted(p.rsplit("/", 1)[1] for p in created)
    # A sequential create under a parent named with a trailing slash gets a bare suffix.
    bare = await s1.create("/seq/", b"", sequential=True)
    assert bare.rsplit("/", 1)[1].isdigit()


async def test_ephemeral_removed_when_session_closes(backend: Backend) -> None:
    owner, observer = await backend.open(), await backend.open()
    await owner.create("/members", b"")
    await owner.create("/members/m1", b"me", ephemeral=True)
    assert (await observer.exists("/members/m1")).ephemeral
    with pytest.raises(NoChildrenForEphemeralsError):
        await owner.create("/members/m1/child", b"")
    gone = Recorder()
    assert await observer.children("/members", watch=gone) == ["m1"]
    await owner.close()
    await gone.wait_for(1)
    assert gone.events[0] == WatchEvent(EventType.CHILDREN, "/members")
    assert await observer.exists("/members/m1") is None
    with pytest.raises(SessionLostError):
        await owner.get("/members")


async def test_session_expiry_removes_ephemerals_and_fires_callback(backend: Backend) -> None:
    owner, observer = await backend.open(session_timeout_s=4.0), await backend.open()
    lost = trio.Event()
    owner.on_session_lost(lost.set)
    await owner.create("/lock", b"owner", ephemeral=True)
    deleted = Recorder()
    await observer.exists("/lock", watch=deleted)
    old_session = owner.session_id
    await backend.expire(owner)
    with trio.fail_after(30):
        await lost.wait()
    await deleted.wait_for(1)
    assert deleted.events == [WatchEvent(EventType.DELETED, "/lock")]
    assert await observer.exists("/lock") is None
    # The store carries on with a new session; the caller re-creates its ephemerals.
    with trio.fail_after(30):
        while True:
            try:
                await owner.create("/lock", b"owner again", ephemeral=True)
                break
            except Exception:  # the ZooKeeper client may still be reconnecting
                await trio.sleep(0.1)
    assert owner.session_id != old_session
    assert (await observer.get("/lock"))[0] == b"owner again"


async def test_data_watch_fires_once_per_registration(store: MetadataStore) -> None:
    await store.create("/w", b"0")
    rec = Recorder()
    await store.get("/w", watch=rec)
    await store.get("/w", watch=rec)  # same callback, same node: still one firing
    await store.put("/w", b"1")
    await store.put("/w", b"2")
    await rec.wait_for(1)
    await rec.settle()
    assert rec.events == [WatchEvent(EventType.CHANGED, "/w")]
    await store.get("/w", watch=rec)  # re-arm
    await store.delete("/w")
    await rec.wait_for(2)
    assert rec.events[1] == WatchEvent(EventType.DELETED, "/w")


async def test_exists_watch_sees_creation(backend: Backend) -> None:
    watcher, writer = await backend.open(), await backend.open()
    rec = Recorder()
    assert await watcher.exists("/later", watch=rec) is None
    await writer.create("/later", b"")
    await rec.wait_for(1)
    assert rec.events == [WatchEvent(EventType.CREATED, "/later")]


async def test_children_watch_fires_once(store: MetadataStore) -> None:
    await store.create("/kids", b"")
    rec = Recorder()
    assert await store.children("/kids", watch=rec) == []
    await store.create("/kids/a", b"")
    await store.create("/kids/b", b"")
    await store.put("/kids", b"data change is not a children change")
    await rec.wait_for(1)
    await rec.settle()
    assert rec.events == [WatchEvent(EventType.CHILDREN, "/kids")]
    with pytest.raises(NotFoundError):
        await store.children("/no-such-node", watch=rec)


async def test_ten_thousand_children(store: MetadataStore) -> None:
    await store.create("/many", b"")
    names = [f"c{i:05d}" for i in range(10_000)]
    send, receive = trio.open_memory_channel[str](len(names))
    for name in names:
        send.send_nowait(name)
    send.close()

    async def worker() -> None:
        async for name in receive:
            await store.create(f"/many/{name}", b"")

    async with trio.open_nursery() as nursery:
        for _ in range(64):
            nursery.start_soon(worker)
    assert await store.children("/many") == names
    assert (await store.exists("/many")).num_children == 10_000


async def test_large_values(store: MetadataStore) -> None:
    one_mib = bytes(range(256)) * 4096
    await store.create("/big", one_mib)
    assert (await store.get("/big"))[0] == one_mib
    at_limit = b"z" * MAX_VALUE_SIZE
    await store.put("/big", at_limit)
    assert (await store.get("/big"))[0] == at_limit
    with pytest.raises(ValueTooLargeError):
        await store.put("/big", at_limit + b"!")
    with pytest.raises(ValueTooLargeError):
        await store.create("/big2", at_limit + b"!")
    assert (await store.get("/big"))[1].version == 1


BAD_PATHS = ["", "relative", "/trailing/", "//double", "/a//b", "/a/./b", "/a/../b", "/nul\x00", "/ctl\x07", 42, None]


@pytest.mark.parametrize("path", BAD_PATHS, ids=repr)
async def test_invalid_paths_rejected(store: MetadataStore, path: object) -> None:
    for call in (
        lambda: store.get(path),  # type: ignore[arg-type]
        lambda: store.exists(path),  # type: ignore[arg-type]
        lambda: store.children(path),  # type: ignore[arg-type]
        lambda: store.put(path, b""),  # type: ignore[arg-type]
        lambda: store.delete(path),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidPathError):
            await call()
    if path != "/trailing/":  # a trailing '/' is allowed for sequential creates only
        with pytest.raises(InvalidPathError):
            await store.create(path, b"", sequential=True)  # type: ignore[arg-type]


async def test_other_bad_input(store: MetadataStore) -> None:
    with pytest.raises(InvalidPathError):
        await store.delete("/")
    with pytest.raises(InvalidPathError):
        await store.create("/", b"")
    with pytest.raises(TypeError):
        await store.create("/s", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await store.put("/s", b"", -7)
    assert await store.exists("/s") is None


async def test_delete_recursive_wide_tree(store: MetadataStore) -> None:
    async with trio.open_nursery() as nursery:
        for i in range(5):
            for j in range(40):
                nursery.start_soon(lambda i=i, j=j: store.create(f"/wide/d{i}/n{j}", b"", make_parents=True))
    assert len(await store.children("/wide")) == 5
    await store.delete_recursive("/wide", max_in_flight=16)
    assert await store.exists("/wide") is None
    await store.delete_recursive("/wide")  # already gone: fine
