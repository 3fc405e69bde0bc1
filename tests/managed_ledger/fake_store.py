"""An in-memory MetadataStore with ZooKeeper semantics for fast unit tests.

Several `FakeStore` clients share one `FakeMetadataServer`, so two managed-ledger owners can
race on the same nodes. Watches and ephemerals are not needed by the managed ledger and are
kept minimal.
"""

from __future__ import annotations

from typing import Callable

import trio

from metadata.errors import AlreadyExistsError, BadVersionError, NotEmptyError, NotFoundError
from metadata.store import MetadataStore, Stat, WatchCallback


class FakeMetadataServer:
    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self.puts = 0

    def client(self) -> "FakeStore":
        return FakeStore(self)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class FakeStore(MetadataStore):
    def __init__(self, server: FakeMetadataServer) -> None:
        self.server = server
        self._seq = 0

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        await trio.lowlevel.checkpoint()
        if path not in self.server.nodes:
            raise NotFoundError(path)
        value, version = self.server.nodes[path]
        return value, Stat(version=version)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        await trio.lowlevel.checkpoint()
        node = self.server.nodes.get(path)
        return Stat(version=node[1]) if node else None

    def _make_parents(self, path: str) -> None:
        parent = _parent(path)
        if parent not in self.server.nodes:
            self._make_parents(parent)
            self.server.nodes[parent] = (b"", 0)

    async def create(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequential: bool = False, make_parents: bool = False
    ) -> str:
        await trio.lowlevel.checkpoint()
        if sequential:
            self._seq += 1
            path = f"{path}{self._seq:010d}"
        if path in self.server.nodes:
            raise AlreadyExistsError(path)
        if make_parents:
            self._make_parents(path)
        elif _parent(path) not in self.server.nodes:
            raise NotFoundError(_parent(path))
        self.server.nodes[path] = (value, 0)
        return path

    async def put(self, path: str, value: bytes, expected_version: int | None = None, *, make_parents: bool = False) -> Stat:
        await trio.lowlevel.checkpoint()
        self.server.puts += 1
        node = self.server.nodes.get(path)
        if expected_version == -1 or (expected_version is None and node is None):
            if node is not None:
                raise AlreadyExistsError(path)
            if make_parents:
                self._make_parents(path)
            elif _parent(path) not in self.server.nodes:
                raise NotFoundError(_parent(path))
            self.server.nodes[path] = (value, 0)
            return Stat(version=0)
        if node is None:
            raise NotFoundError(path)
        if expected_version is not None and node[1] != expected_version:
            raise BadVersionError(path)
        self.server.nodes[path] = (value, node[1] + 1)
        return Stat(version=node[1] + 1)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        await trio.lowlevel.checkpoint()
        node = self.server.nodes.get(path)
        if node is None:
            raise NotFoundError(path)
        if expected_version is not None and node[1] != expected_version:
            raise BadVersionError(path)
        if any(_parent(p) == path for p in self.server.nodes if p != path):
            raise NotEmptyError(path)
        del self.server.nodes[path]

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        await trio.lowlevel.checkpoint()
        if path not in self.server.nodes:
            raise NotFoundError(path)
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.server.nodes if p.startswith(prefix) and "/" not in p[len(prefix):])

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        pass

    @property
    def session_id(self) -> int:
        return id(self)

    async def close(self) -> None:
        pass
