"""The MetadataStore interface every layer above programs against.

Two backends implement it, chosen by URL in :func:`metadata.open_store`:
``zk://host:port[,host:port...][/chroot]`` (kazoo, real ZooKeeper) and ``rocksdb:///path``
(embedded; ephemeral nodes live as long as this process's session); ``memory://`` for tests.
All operations are trio-async; values are bytes (use :mod:`metadata.values` for msgpack).
Semantics follow ZooKeeper: versions start at 0 on create and grow by one per put; a
parent must exist unless ``make_parents`` is set; watches are one-shot.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from enum import Enum
from typing import Callable

MAX_VALUE_SIZE = 1024 * 1024 * 4  # bytes; ZooKeeper's jute.maxbuffer is raised to fit


@dataclass(frozen=True)
class Stat:
    """Node metadata returned with every read and write."""

    version: int
    ctime_ms: int = 0
    mtime_ms: int = 0
    ephemeral: bool = False
    num_children: int = 0


class EventType(Enum):
    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    CHILDREN = "children"
    SESSION_LOST = "session_lost"


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    path: str


# Watch callbacks run on the store's trio loop; they must not block (hand off to a channel).
WatchCallback = Callable[[WatchEvent], None]


class MetadataStore(abc.ABC):
    """A hierarchical, versioned key-value store with sessions (ZooKeeper semantics)."""

    @abc.abstractmethod
    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """Value and stat; NotFoundError if absent. `watch` fires once on change/delete."""

    @abc.abstractmethod
    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        """Stat or None. `watch` fires once on create/change/delete."""

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node and return its real path (with the 10-digit suffix if sequential).

        AlreadyExistsError if it exists; NotFoundError if the parent is missing and
        make_parents is false. Parents made implicitly are persistent and empty.
        """

    @abc.abstractmethod
    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, make_parents: bool = False
    ) -> Stat:
        """Compare-and-set. expected_version None = unconditional (create if missing);
        -1 = must not exist (AlreadyExistsError otherwise); n = node must be at version n
        (BadVersionError otherwise, NotFoundError if absent)."""

    @abc.abstractmethod
    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete a node (NotFoundError, BadVersionError, NotEmptyError)."""

    @abc.abstractmethod
    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Sorted child names (not paths); NotFoundError if absent. `watch` fires once when
        the set of children changes or the node is deleted."""

    async def delete_recursive(self, path: str, *, max_in_flight: int = 64) -> None:
        """Delete a subtree, ignoring nodes that vanish meanwhile. Siblings are deleted
        concurrently (at most `max_in_flight` requests at once), children before parents."""
        import trio

        from metadata.errors import NotFoundError

        limiter = trio.CapacityLimiter(max_in_flight)

        async def remove(p: str) -> None:
            try:
                async with limiter:
                    kids = await self.children(p)
            except NotFoundError:
                return
            if kids:
                async with trio.open_nursery() as nursery:
                    for kid in kids:
                        nursery.start_soon(remove, f"{p.rstrip('/')}/{kid}")
            try:
                async with limiter:
                    await self.delete(p)
            except NotFoundError:
                pass

        await remove(path)

    # True when the session ends if the server hears nothing from us for the session timeout
    # (ZooKeeper): a client cut off from it must assume the session lost after that long.
    session_expires_by_timeout: bool = False

    @abc.abstractmethod
    def on_session_lost(self, callback: Callable[[], None]) -> None:
        """Register a callback run (on the trio loop) when the session expires or is lost;
        the store's ephemeral nodes are gone by then."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id (ephemeral nodes belong to it)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the session (ephemeral nodes are removed) and release resources."""

    async def __aenter__(self) -> "MetadataStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
