"""Fixtures of the metadata contract suite: the same tests run against every backend.

`backend` is parametrised over memory, rocksdb (embedded, a fresh database per test) and zk
(the session's real ZooKeeper, a fresh chroot per test). A backend opens any number of
sessions on the same data and can force a real session expiry on one of them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from kazoo.client import KazooClient

from metadata import MetadataStore, open_store
from tests.fixtures.zookeeper import ZooKeeperServer


def expire_zk_session(connect_string: str, client_id: tuple[int, bytes]) -> None:
    """Expire a ZooKeeper session for real: a second client takes the session over by id and
    password and closes it; the server drops the session and its ephemeral nodes, and the
    original client learns it is expired when it reconnects."""
    thief = KazooClient(hosts=connect_string, client_id=client_id)
    thief.start(timeout=10)
    thief.stop()
    thief.close()


class Backend:
    """Opens sessions on one backend's data and expires them."""

    def __init__(self, name: str, url: str, zk: ZooKeeperServer | None = None) -> None:
        self.name = name
        self.url = url
        self.zk = zk
        self.stores: list[MetadataStore] = []

    async def open(self, **kwargs: float) -> MetadataStore:
        store = await open_store(self.url, **kwargs)
        self.stores.append(store)
        return store

    async def expire(self, store: MetadataStore) -> None:
        if self.zk is not None:
            client_id = store.client_id  # type: ignore[attr-defined]
            await trio.to_thread.run_sync(expire_zk_session, self.zk.connect_string, client_id)
        else:
            await store.expire()  # type: ignore[attr-defined]

    async def close_all(self) -> None:
        for store in self.stores:
            await store.close()

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"


@pytest.fixture(params=["memory", "rocksdb", "zk"])
def backend_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":
        return Backend("memory", f"memory://test-{uuid.uuid4().hex}")
    if request.param == "rocksdb":
        return Backend("rocksdb", f"rocksdb://{tmp_path / 'meta'}")
    return Backend("zk", request.getfixturevalue("zk_url"), request.getfixturevalue("zk_server"))


@pytest.fixture
async def backend(backend_spec: Backend) -> AsyncIterator[Backend]:
    try:
        yield backend_spec
    finally:
        await backend_spec.close_all()


@pytest.fixture
async def store(backend: Backend) -> MetadataStore:
    return await backend.open()
