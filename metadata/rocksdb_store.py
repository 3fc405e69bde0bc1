"""The embedded `rocksdb:///path` backend: a LocalTree stored in RocksDB (standalone mode).

One process owns the database (RocksDB's LOCK file enforces it); tools may read a snapshot
of it meanwhile with ``open_rocksdb_store(path, read_only=True)``. `EmbeddedMetadata` opens it
and hands out sessions; `open_store("rocksdb:///path")` shares one `EmbeddedMetadata` per path
in the process, so a standalone broker and its bookie see the same tree, each session with
its own ephemeral nodes. Ephemeral nodes left by an earlier process are removed on open.

Key layout (one keyspace, raw bytes):
  ``N<parent>\\0<name>`` -> msgpack node record (root: ``N\\0``); the children of P are
  exactly the keys with prefix ``N<P>\\0``, so listing is one ordered prefix scan.
  ``E<owner u64 BE><path>`` -> b"" : ephemeral index, per owning session.
Every operation is one WriteBatch; the WAL is fsynced before the operation returns (writers
that overlap share the fsync), so a call that returned survives SIGKILL and power loss.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

import trio
from rocksdict import AccessType, Options, Rdict, WriteBatch, WriteOptions

from metadata.errors import SessionLostError, StoreUnavailableError
from metadata.local_session import LocalSession
from metadata.local_tree import LocalTree, NodeRecord, NodeTable

_NODE = b"N"
_EPHEMERAL = b"E"


def node_key(path: str) -> bytes:
    if path == "/":
        return _NODE + b"\0"
    parent, _, name = path.rpartition("/")
    return _NODE + (parent or "/").encode() + b"\0" + name.encode()


def children_prefix(path: str) -> bytes:
    return _NODE + path.encode() + b"\0"


def ephemeral_key(owner: int, path: str) -> bytes:
    return _EPHEMERAL + owner.to_bytes(8, "big") + path.encode()


class RocksDBNodeTable(NodeTable):
    """Node records in a RocksDB database; every commit is one synced WriteBatch."""

    blocking = True

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        opts = Options(raw_mode=True)
        try:
            if read_only:
                # A snapshot as of now, readable while another process holds the LOCK.
                self._db = Rdict(self.path, opts, access_type=AccessType.read_only())
            else:
                Path(self.path).mkdir(parents=True, exist_ok=True)
                opts.create_if_missing(True)
                self._db = Rdict(self.path, opts)
        except Exception as exc:  # rocksdict raises a bare Exception (e.g. the LOCK is held)
            raise StoreUnavailableError(f"cannot open metadata database {self.path}: {exc}") from exc
        # Session ids need no disk write: ephemeral nodes of earlier processes are swept on
        # open, so ids only have to be unique within this process. Seeding with the clock
        # (as ZooKeeper does) keeps them distinct across restarts too, which helps in logs.
        self._session_ids = itertools.count((int(time.time() * 1000) & 0xFFFFFFFFFF) << 20 | 1)
        self._nosync = WriteOptions()  # commit() writes the WAL; sync() fsyncs it (group commit)
        self._written = 0  # commits so far
        self._synced = 0  # commits known durable
        self._sync_lock = threading.Lock()

    def get(self, path: str) -> NodeRecord | None:
        data = self._db.get(node_key(path))
        return NodeRecord.from_bytes(data) if data is not None else None

    def _scan(self, prefix: bytes) -> list[bytes]:
        keys: list[bytes] = []
        for key in self._db.keys(from_key=prefix):
            if not isinstance(key, bytes) or not key.startswith(prefix):
                break
            keys.append(key)
        return keys

    def children(self, path: str) -> list[str]:
        prefix = children_prefix(path)
        names = [k[len(prefix) :].decode() for k in self._scan(prefix)]
        names.sort()  # byte order of UTF-8 equals code-point order; sort anyway for clarity
        return names

    def commit(self, puts: dict[str, NodeRecord], deletes: dict[str, NodeRecord]) -> None:
        if self.read_only:
            raise StoreUnavailableError(f"metadata database {self.path} is open read-only")
        batch = WriteBatch(raw_mode=True)
        for path, rec in deletes.items():
            batch.delete(node_key(path))
            if rec.ephemeral_owner:
                batch.delete(ephemeral_key(rec.ephemeral_owner, path))
        for path, rec in puts.items():
            batch.put(node_key(path), rec.to_bytes())
            if rec.ephemeral_owner:
                batch.put(ephemeral_key(rec.ephemeral_owner, path), b"")
        self._db.write(batch, self._nosync)
        self._written += 1  # under the tree lock

    def sync(self) -> None:
        # Group commit: a thread that waited for the fsync lock is often covered already by
        # the fsync that just finished (it started after this thread's write).
        target = self._written
        with self._sync_lock:
            if self._synced >= target:
                return
            upto = self._written
            self._db.flush_wal(True)
            self._synced = upto

    def ephemerals(self, owner: int | None = None) -> list[str]:
        prefix = _EPHEMERAL if owner is None else _EPHEMERAL + owner.to_bytes(8, "big")
        return [k[len(_EPHEMERAL) + 8 :].decode() for k in self._scan(prefix)]

    def next_session_id(self) -> int:
        return next(self._session_ids)

    def close(self) -> None:
        self._db.close()


_registry: dict[str, EmbeddedMetadata] = {}
_registry_lock = threading.Lock()


class EmbeddedMetadata:
    """Owns one embedded metadata database in this process and hands out sessions.

    Reference-counted: every `open()` and every session from `open_store` holds a reference;
    the database closes when the last one is released. Use as ``async with``.
    """

    def __init__(self, path: str, tree: LocalTree) -> None:
        self.path = path
        self.tree = tree
        self._refs = 0

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> EmbeddedMetadata:
        """The process's EmbeddedMetadata for `path` (opened if needed); release with close()."""
        key = os.path.realpath(path)
        with _registry_lock:
            existing = _registry.get(key)
            if existing is not None and not existing.tree.closed:
                existing._refs += 1
                return existing
        # Opening replays the WAL and sweeps stale ephemerals: off the event loop.
        tree = await trio.to_thread.run_sync(lambda: LocalTree(RocksDBNodeTable(key)))
        with _registry_lock:
            existing = _registry.get(key)
            if existing is not None and not existing.tree.closed:
                tree.close()  # lost a race with another opener: share theirs
                existing._refs += 1
                return existing
            emb = _registry[key] = cls(key, tree)
            emb._refs = 1
            return emb

    async def session(self) -> LocalSession:
        """A new session (own ephemeral nodes, own session-lost callbacks). Closing it does
        not release this EmbeddedMetadata's reference."""
        if self.tree.closed:
            raise SessionLostError(f"embedded metadata {self.path} is closed")
        return LocalSession(self.tree)

    async def open_session(self) -> LocalSession:
        """A session holding its own reference: the database stays open until it closes."""
        with _registry_lock:
            self._refs += 1
        try:
            return LocalSession(self.tree, on_close=self._release)
        except BaseException:
            self._release()
            raise

    async def expire_session(self, session: LocalSession) -> None:
        """Expire `session` now: its ephemeral nodes vanish and its session-lost callbacks run."""
        await session.expire()

    def _release(self) -> None:
        with _registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            if _registry.get(self.path) is self:
                del _registry[self.path]
        self.tree.close()

    async def close(self) -> None:
        """Release this reference (the database closes with the last one)."""
        await trio.to_thread.run_sync(self._release)

    async def __aenter__(self) -> EmbeddedMetadata:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def open_rocksdb_store(path: str, *, read_only: bool = False) -> LocalSession:
    """A session on the process-wide embedded database at `path` (see EmbeddedMetadata).

    `read_only`: a private snapshot of a database another process may own (operator tools);
    reads work, writes fail with StoreUnavailableError."""
    if read_only:
        tree = await trio.to_thread.run_sync(lambda: LocalTree(RocksDBNodeTable(path, read_only=True)))
        return LocalSession(tree, on_close=tree.close)
    emb = await EmbeddedMetadata.open(path)
    try:
        return await emb.open_session()
    finally:
        await emb.close()  # the session holds its own reference now
