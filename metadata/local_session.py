"""`LocalSession`: one client session on a LocalTree, the MetadataStore of the memory and
RocksDB backends. Operations on a blocking (RocksDB) tree run in worker threads, at most
`max_threads` at once per session; a memory tree is called inline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from metadata import paths
from metadata.errors import AlreadyExistsError, InvalidPathError, SessionLostError
from metadata.local_tree import LocalTree
from metadata.store import MetadataStore, Stat, WatchCallback

T = TypeVar("T")


class LocalSession(MetadataStore):
    """One session on a LocalTree: the MetadataStore the memory and RocksDB backends return."""

    def __init__(
        self,
        tree: LocalTree,
        *,
        on_close: Callable[[], None] | None = None,
        max_threads: int = 4,
    ) -> None:
        self._tree = tree
        self._token = trio.lowlevel.current_trio_token()
        self._session_id = tree.open_session(self._token)
        self._lost_callbacks: list[Callable[[], None]] = []
        self._on_close = on_close
        self._closed = False
        self._limiter = trio.CapacityLimiter(max_threads) if tree.table.blocking else None

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def tree(self) -> LocalTree:
        return self._tree

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise SessionLostError("the store is closed")
        if not self._tree.is_session_open(self._session_id):
            self._renew_session()
        if self._limiter is None:
            # Like every trio operation, yield to the scheduler: a loop of in-memory calls
            # must not starve other tasks, and queued watch callbacks get to run.
            result = fn(self._session_id, *args)
            await trio.lowlevel.checkpoint()
            return result
        return await trio.to_thread.run_sync(fn, self._session_id, *args, limiter=self._limiter)

    def _renew_session(self) -> None:
        # The session expired (its callbacks already ran): carry on with a fresh one, as a
        # ZooKeeper client does after expiry. Ephemeral nodes of the old one are gone.
        self._session_id = self._tree.open_session(self._token)
        for callback in self._lost_callbacks:
            self._tree.add_session_lost_callback(self._session_id, callback)

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        paths.validate_path(path)
        return await self._call(self._tree.get, path, watch)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        paths.validate_path(path)
        return await self._call(self._tree.exists, path, watch)

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        paths.validate_create_path(path, sequential)
        value = paths.check_value(value)
        real, _ = await self._call(self._tree.create, path, value, ephemeral, sequential, make_parents)
        return real

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, make_parents: bool = False
    ) -> Stat:
        paths.validate_path(path)
        if path == paths.ROOT and expected_version == -1:
            raise AlreadyExistsError(path)
        value = paths.check_value(value)
        _check_version(expected_version)
        return await self._call(self._tree.put, path, value, expected_version, make_parents)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        paths.validate_path(path)
        if path == paths.ROOT:
            raise InvalidPathError("cannot delete the root node")
        _check_version(expected_version)
        await self._call(self._tree.delete, path, expected_version)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        paths.validate_path(path)
        return await self._call(self._tree.children, path, watch)

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        self._lost_callbacks.append(callback)
        self._tree.add_session_lost_callback(self._session_id, callback)

    async def expire(self) -> None:
        """Expire this session as if its heartbeats had stopped (tests and admin tools)."""
        await self._end(expired=True)

    async def _end(self, *, expired: bool) -> None:
        if self._tree.closed:
            return
        if self._limiter is None:
            self._tree.end_session(self._session_id, expired=expired)
        else:
            await trio.to_thread.run_sync(
                lambda: self._tree.end_session(self._session_id, expired=expired), limiter=self._limiter
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            try:
                await self._end(expired=False)
            finally:
                if self._on_close is not None:
                    # May close the database (the last reference): off the loop if it blocks.
                    if self._limiter is None:
                        self._on_close()
                    else:
                        await trio.to_thread.run_sync(self._on_close)


def _check_version(expected_version: int | None) -> None:
    if expected_version is not None and (not isinstance(expected_version, int) or expected_version < -1):
        raise ValueError(f"expected_version must be None, -1 or >= 0, got {expected_version!r}")
