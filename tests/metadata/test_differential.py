"""The embedded backends must behave exactly like ZooKeeper: the same random operation
sequences run against a real ZooKeeper and against memory/RocksDB, and every result (values,
versions, child counts, sequential names, error types) and every watch event must match."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import trio

from metadata import MetadataStore, open_store
from metadata.errors import MetadataError

PATHS = ["/a", "/a/b", "/a/b/c", "/a/e", "/x", "/x/y"]


def random_ops(seed: int, count: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    ops: list[tuple[Any, ...]] = []
    for _ in range(count):
        path = rng.choice(PATHS)
        session = rng.randrange(2)
        kind = rng.choice(["create", "create", "put", "put", "delete", "get", "exists", "children", "seq", "reopen"])
        if kind == "create":
            ops.append((kind, session, path, rng.random() < 0.3, rng.random() < 0.3))
        elif kind == "put":
            ops.append((kind, session, path, rng.choice([None, -1, 0, 1, 2]), rng.random() < 0.3))
        elif kind == "delete":
            ops.append((kind, session, path, rng.choice([None, 0, 1])))
        elif kind == "seq":
            ops.append((kind, session, rng.choice(["/a/s-", "/x/"]), rng.random() < 0.5))
        elif kind == "reopen":
            ops.append((kind, session))
        else:
            ops.append((kind, session, path))
    return ops


def stat_view(stat: Any) -> Any:
    return None if stat is None else (stat.version, stat.ephemeral, stat.num_children)


async def run_ops(url: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    sessions: list[MetadataStore] = [await open_store(url), await open_store(url)]
    out: list[Any] = []
    try:
        for i, op in enumerate(ops):
            kind, s = op[0], op[1]
            store = sessions[s]
            try:
                if kind == "create":
                    r: Any = await store.create(op[2], b"c%d" % i, ephemeral=op[3], make_parents=op[4])
                elif kind == "put":
                    r = stat_view(await store.put(op[2], b"p%d" % i, op[3], make_parents=op[4]))
                elif kind == "delete":
                    r = await store.delete(op[2], op[3])
                elif kind == "get":
                    value, stat = await store.get(op[2])
                    r = (value, stat_view(stat))
                elif kind == "exists":
                    r = stat_view(await store.exists(op[2]))
                elif kind == "children":
                    r = await store.children(op[2])
                elif kind == "seq":
                    r = await store.create(op[2], b"", sequential=True, ephemeral=op[3], make_parents=True)
                else:  # close the session (its ephemerals go) and open a new one
                    await store.close()
                    sessions[s] = await open_store(url)
                    r = "reopened"
            except MetadataError as exc:
                r = type(exc).__name__
            out.append((i, op, r))
    finally:
        for store in sessions:
            await store.close()
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_embedded_backends_match_zookeeper(seed: int, zk_url: str, tmp_path: Path) -> None:
    ops = random_ops(seed, 150)
    expected = await run_ops(zk_url, ops)
    for url in (f"memory://diff-{seed}-{tmp_path.name}", f"rocksdb://{tmp_path / 'meta'}"):
        got = await run_ops(url, ops)
        for want, have in zip(expected, got, strict=True):
            assert have == want, f"{url}: op #{want[0]} {want[1]} gave {have[2]!r}, ZooKeeper gave {want[2]!r}"


class Writers:
    """Two writer sessions on one store applying ops one at a time (errors are ignored:
    only the watch events they cause matter here)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sessions: list[MetadataStore] = []

    async def apply(self, i: int, op: tuple[Any, ...]) -> None:
        if not self.sessions:
            self.sessions = [await open_store(self.url), await open_store(self.url)]
        kind, s = op[0], op[1]
        store = self.sessions[s]
        try:
            if kind == "create":
                await store.create(op[2], b"c", ephemeral=op[3], make_parents=op[4])
            elif kind == "put":
                await store.put(op[2], b"p%d" % i, op[3], make_parents=op[4])
            elif kind == "delete":
                await store.delete(op[2], op[3])
            elif kind == "seq":
                await store.create(op[2], b"", sequential=True, ephemeral=op[3], make_parents=True)
            elif kind == "reopen":
                await store.close()
                self.sessions[s] = await open_store(self.url)
        except MetadataError:
            pass

    async def close(self) -> None:
        for store in self.sessions:
            await store.close()


async def run_with_watches(url: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    """Run `ops` while a third session keeps a data and a children watch armed on every
    path; return, per op, the sorted watch events it caused."""
    observer = await open_store(url)
    writers = Writers(url)
    events: list[tuple[str, str, str]] = []
    callbacks = {
        (path, kind): (lambda ev, kind=kind: events.append((kind, ev.type.value, ev.path)))
        for path in PATHS
        for kind in ("data", "children")
    }

    async def arm() -> None:
        for path in PATHS:
            await observer.exists(path, watch=callbacks[(path, "data")])
            try:
                await observer.children(path, watch=callbacks[(path, "children")])
            except MetadataError:
                pass

    async def settle() -> list[tuple[str, str, str]]:
        # A read after the write returns only after ZooKeeper sent us the watch events;
        # the short sleep lets the loop run the callbacks queued by any backend.
        await observer.exists("/")
        await trio.sleep(0.01)
        caused = sorted(events)
        events.clear()
        return caused

    per_op: list[Any] = []
    try:
        for i, op in enumerate(ops):
            await arm()
            await settle()
            await writers.apply(i, op)
            per_op.append((i, op, await settle()))
    finally:
        await writers.close()
        await observer.close()
    return per_op


async def test_watch_events_match_zookeeper(zk_url: str, tmp_path: Path) -> None:
    ops = [op for op in random_ops(7, 120) if op[0] not in ("get", "exists", "children")][:60]
    expected = await run_with_watches(zk_url, ops)
    assert any(caused for _, _, caused in expected)  # the sequence does trigger watches
    for url in (f"memory://watch-diff-{tmp_path.name}", f"rocksdb://{tmp_path / 'meta'}"):
        got = await run_with_watches(url, ops)
        for want, have in zip(expected, got, strict=True):
            assert have == want, f"{url}: op #{want[0]} {want[1]} fired {have[2]}, ZooKeeper fired {want[2]}"
