"""The embedded backends must behave exactly like ZooKeeper: the same random operation
sequences run against a real ZooKeeper and against memory/RocksDB, and every result (values,
versions, child counts, sequential names, error types) must match."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

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
