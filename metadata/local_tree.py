"""The in-process node tree behind the memory and RocksDB backends (ZooKeeper semantics).

`LocalTree` holds the rules: versions, sequential suffixes from the parent's create count,
ephemeral owners, one-shot watches and sessions. It stores nodes through a `NodeTable`
(a dict for `memory://`, RocksDB for `rocksdb://`). Every operation runs whole under one
`threading.Lock`, so a compare-and-set is atomic even when operations run in worker threads
(RocksDB calls do, to keep the event loop free). `LocalSession` is the `MetadataStore` one
client sees (`metadata.local_session`); several sessions may share a tree, each with its
own ephemeral nodes.

Watch and session-lost callbacks are delivered on the session's own trio loop via its trio
token once the operation that triggered them is applied (the RocksDB fsync may still be in
flight: every observer lives in this process, so a crash that loses the write loses them too).
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import msgpack
import trio

from metadata import paths
from metadata.callbacks import deliver
from metadata.errors import (
    AlreadyExistsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NotEmptyError,
    NotFoundError,
    SessionLostError,
)
from metadata.store import EventType, Stat, WatchCallback, WatchEvent

T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class NodeRecord:
    """One node as stored: the msgpack record a table keeps per path."""

    value: bytes
    version: int
    ctime_ms: int
    mtime_ms: int
    ephemeral_owner: int = 0  # session id; 0 = persistent
    cversion: int = 0  # bumped on every child create and delete (ZooKeeper's cversion)
    # Children ever created: the next sequential suffix. ZooKeeper (3.8, checked against the
    # real server) numbers sequential children by creates only; deletes do not advance it.
    seq: int = 0
    num_children: int = 0

    def to_bytes(self) -> bytes:
        return msgpack.packb(
            {
                "value": self.value,
                "version": self.version,
                "ctime": self.ctime_ms,
                "mtime": self.mtime_ms,
                "ephemeral_owner": self.ephemeral_owner,
                "cversion": self.cversion,
                "seq": self.seq,
                "num_children": self.num_children,
            },
            use_bin_type=True,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> NodeRecord:
        d = msgpack.unpackb(data, raw=False)
        return cls(
            value=d["value"],
            version=d["version"],
            ctime_ms=d["ctime"],
            mtime_ms=d["mtime"],
            ephemeral_owner=d.get("ephemeral_owner", 0),
            cversion=d.get("cversion", 0),
            seq=d.get("seq", 0),
            num_children=d.get("num_children", 0),
        )

    def stat(self) -> Stat:
        return Stat(
            version=self.version,
            ctime_ms=self.ctime_ms,
            mtime_ms=self.mtime_ms,
            ephemeral=self.ephemeral_owner != 0,
            num_children=self.num_children,
        )


class NodeTable(abc.ABC):
    """Storage for a LocalTree. Called with the tree lock held; `commit` must be atomic."""

    #: True if calls may block (disk): the session then runs operations in a worker thread.
    blocking: bool = False
    #: True for a read-only view (another process owns the database): nothing is written.
    read_only: bool = False

    @abc.abstractmethod
    def get(self, path: str) -> NodeRecord | None: ...

    @abc.abstractmethod
    def children(self, path: str) -> list[str]:
        """Sorted child names."""

    @abc.abstractmethod
    def commit(self, puts: dict[str, NodeRecord], deletes: dict[str, NodeRecord]) -> None:
        """Atomically write `puts` and remove `deletes` (given with their last record so the
        table can maintain its ephemeral index). Durable only after the next `sync()`."""

    def sync(self) -> None:  # noqa: B027 (optional hook: a memory table has nothing to sync)
        """Make every commit so far durable. Called outside the tree lock, so concurrent
        writers share one fsync (group commit)."""

    @abc.abstractmethod
    def ephemerals(self, owner: int | None = None) -> list[str]:
        """Paths of ephemeral nodes owned by `owner` (all owners if None)."""

    @abc.abstractmethod
    def next_session_id(self) -> int:
        """A session id never handed out before by this table."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release resources (the tree is unusable afterwards)."""


class _Txn:
    """Writes of one operation, staged so later reads in the same operation see them."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.puts: dict[str, NodeRecord] = {}
        self.deletes: dict[str, NodeRecord] = {}
        self.events: list[tuple[str, EventType]] = []

    def get(self, path: str) -> NodeRecord | None:
        if path in self.puts:
            return self.puts[path]
        if path in self.deletes:
            return None
        return self.table.get(path)

    def put(self, path: str, rec: NodeRecord) -> None:
        self.deletes.pop(path, None)
        self.puts[path] = rec

    def delete(self, path: str, rec: NodeRecord) -> None:
        self.puts.pop(path, None)
        self.deletes[path] = rec


@dataclass
class _SessionState:
    token: trio.lowlevel.TrioToken
    lost_callbacks: list[Callable[[], None]]


class LocalTree:
    """A ZooKeeper-semantics tree over a NodeTable, shared by the sessions of one process."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.lock = threading.Lock()
        self._sessions: dict[int, _SessionState] = {}
        # path -> [(session id, callback)]; one-shot, deduplicated per (session, callback).
        self._data_watches: dict[str, list[tuple[int, WatchCallback]]] = {}
        self._child_watches: dict[str, list[tuple[int, WatchCallback]]] = {}
        self.closed = False
        if table.read_only:
            return  # a view of another process's live tree: its ephemerals are not stale
        with self.lock:
            txn = _Txn(table)
            if txn.get(paths.ROOT) is None:
                ts = now_ms()
                txn.put(paths.ROOT, NodeRecord(b"", 0, ts, ts))
            # One process owns the table: ephemeral nodes of earlier processes are stale.
            for path in sorted(table.ephemerals(), key=len, reverse=True):
                self._remove(txn, path)
            if txn.puts or txn.deletes:
                table.commit(txn.puts, txn.deletes)
                table.sync()

    # -- sessions ------------------------------------------------------------------------------

    def open_session(self, token: trio.lowlevel.TrioToken) -> int:
        with self.lock:
            self._check_open()
            sid = self.table.next_session_id()
            self._sessions[sid] = _SessionState(token, [])
            return sid

    def add_session_lost_callback(self, sid: int, callback: Callable[[], None]) -> None:
        with self.lock:
            state = self._sessions.get(sid)
            if state is not None:
                state.lost_callbacks.append(callback)

    def end_session(self, sid: int, *, expired: bool) -> None:
        """Close or expire a session: its ephemeral nodes and watches go; if expired, its
        session-lost callbacks run (on its loop) after the nodes are gone."""
        with self.lock:
            state = self._sessions.pop(sid, None)
            if state is None:
                return
            for table in (self._data_watches, self._child_watches):
                for path in list(table):
                    kept = [w for w in table[path] if w[0] != sid]
                    if kept:
                        table[path] = kept
                    else:
                        del table[path]
            txn = _Txn(self.table)
            for path in sorted(self.table.ephemerals(sid), key=len, reverse=True):
                if txn.get(path) is not None:
                    self._remove(txn, path)
            self._commit(txn)
        if txn.puts or txn.deletes:
            self._sync()
        if expired:
            for callback in state.lost_callbacks:
                deliver(state.token, callback)

    def is_session_open(self, sid: int) -> bool:
        return sid in self._sessions

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.table.close()

    def _check_open(self) -> None:
        if self.closed:
            raise SessionLostError("the metadata database is closed")

    # -- operations (each runs under the lock) -------------------------------------------------

    def _run(self, sid: int, fn: Callable[[_Txn], T]) -> T:
        with self.lock:
            self._check_open()
            if sid not in self._sessions:
                raise SessionLostError(f"session {sid:#x} is closed or expired")
            txn = _Txn(self.table)
            result = fn(txn)
            self._commit(txn)
        if txn.puts or txn.deletes:
            # Durable before we return. Others may already see the write: they live in this
            # process, so a crash that loses it takes them down too.
            self._sync()
        return result

    def _sync(self) -> None:
        try:
            self.table.sync()
        except Exception as exc:
            if self.closed:  # closing flushed everything already
                raise SessionLostError("the metadata database was closed") from exc
            raise

    def _commit(self, txn: _Txn) -> None:
        if txn.puts or txn.deletes:
            self.table.commit(txn.puts, txn.deletes)
        for path, kind in txn.events:
            self._fire(path, kind)

    def _fire(self, path: str, kind: EventType) -> None:
        watchers: list[tuple[int, WatchCallback]] = []
        if kind in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
            watchers += self._data_watches.pop(path, [])
        if kind in (EventType.CHILDREN, EventType.DELETED):
            watchers += self._child_watches.pop(path, [])
        event = WatchEvent(kind, path)
        for sid, callback in watchers:
            state = self._sessions.get(sid)
            if state is not None:
                deliver(state.token, callback, event)

    def _watch(
        self, table: dict[str, list[tuple[int, WatchCallback]]], sid: int, path: str, cb: WatchCallback | None
    ) -> None:
        if cb is None:
            return
        entry = (sid, cb)
        lst = table.setdefault(path, [])
        if entry not in lst:
            lst.append(entry)

    def get(self, sid: int, path: str, watch: WatchCallback | None) -> tuple[bytes, Stat]:
        def op(txn: _Txn) -> tuple[bytes, Stat]:
            rec = txn.get(path)
            if rec is None:
                raise NotFoundError(path)
            self._watch(self._data_watches, sid, path, watch)
            return rec.value, rec.stat()

        return self._run(sid, op)

    def exists(self, sid: int, path: str, watch: WatchCallback | None) -> Stat | None:
        def op(txn: _Txn) -> Stat | None:
            rec = txn.get(path)
            self._watch(self._data_watches, sid, path, watch)
            return rec.stat() if rec else None

        return self._run(sid, op)

    def children(self, sid: int, path: str, watch: WatchCallback | None) -> list[str]:
        def op(txn: _Txn) -> list[str]:
            if txn.get(path) is None:
                raise NotFoundError(path)
            self._watch(self._child_watches, sid, path, watch)
            return self.table.children(path)

        return self._run(sid, op)

    def create(
        self, sid: int, path: str, value: bytes, ephemeral: bool, sequential: bool, make_parents: bool
    ) -> tuple[str, Stat]:
        def op(txn: _Txn) -> tuple[str, Stat]:
            parent = paths.parent_of(path) if not path.endswith("/") else path.rstrip("/") or paths.ROOT
            if make_parents:
                self._make_parents(txn, parent)
            parent_rec = txn.get(parent)
            if parent_rec is None:
                raise NotFoundError(f"parent of {path} does not exist")
            if parent_rec.ephemeral_owner:
                raise NoChildrenForEphemeralsError(f"{parent} is ephemeral")
            real = f"{path}{parent_rec.seq:010d}" if sequential else path
            if txn.get(real) is not None:
                raise AlreadyExistsError(real)
            rec = self._add(txn, real, value, sid if ephemeral else 0)
            return real, rec.stat()

        return self._run(sid, op)

    def put(self, sid: int, path: str, value: bytes, expected_version: int | None, make_parents: bool) -> Stat:
        def op(txn: _Txn) -> Stat:
            rec = txn.get(path)
            if rec is None:
                if expected_version is not None and expected_version >= 0:
                    raise NotFoundError(path)
                parent = paths.parent_of(path)
                if make_parents:
                    self._make_parents(txn, parent)
                parent_rec = txn.get(parent)
                if parent_rec is None:
                    raise NotFoundError(f"parent of {path} does not exist")
                if parent_rec.ephemeral_owner:
                    raise NoChildrenForEphemeralsError(f"{parent} is ephemeral")
                return self._add(txn, path, value, 0).stat()
            if expected_version == -1:
                raise AlreadyExistsError(path)
            if expected_version is not None and rec.version != expected_version:
                raise BadVersionError(f"{path}: version {rec.version}, expected {expected_version}")
            new = replace(rec, value=value, version=rec.version + 1, mtime_ms=now_ms())
            txn.put(path, new)
            txn.events.append((path, EventType.CHANGED))
            return new.stat()

        return self._run(sid, op)

    def delete(self, sid: int, path: str, expected_version: int | None) -> None:
        def op(txn: _Txn) -> None:
            rec = txn.get(path)
            if rec is None:
                raise NotFoundError(path)
            if expected_version is not None and expected_version != -1 and rec.version != expected_version:
                raise BadVersionError(f"{path}: version {rec.version}, expected {expected_version}")
            if rec.num_children:
                raise NotEmptyError(f"{path} has {rec.num_children} children")
            self._remove(txn, path)

        self._run(sid, op)

    # -- helpers (lock held) -------------------------------------------------------------------

    def _make_parents(self, txn: _Txn, parent: str) -> None:
        for p in paths.ancestors(parent + "/x"):  # the parent and its ancestors
            rec = txn.get(p)
            if rec is None:
                self._add(txn, p, b"", 0)
            elif rec.ephemeral_owner:
                raise NoChildrenForEphemeralsError(f"{p} is ephemeral")

    def _add(self, txn: _Txn, path: str, value: bytes, owner: int) -> NodeRecord:
        ts = now_ms()
        rec = NodeRecord(value, 0, ts, ts, ephemeral_owner=owner)
        parent = paths.parent_of(path)
        parent_rec = txn.get(parent)
        assert parent_rec is not None
        txn.put(
            parent,
            replace(
                parent_rec,
                cversion=parent_rec.cversion + 1,
                seq=parent_rec.seq + 1,
                num_children=parent_rec.num_children + 1,
            ),
        )
        txn.put(path, rec)
        txn.events += [(path, EventType.CREATED), (parent, EventType.CHILDREN)]
        return rec

    def _remove(self, txn: _Txn, path: str) -> None:
        rec = txn.get(path)
        if rec is None:
            return
        parent = paths.parent_of(path)
        parent_rec = txn.get(parent)
        if parent_rec is not None:
            txn.put(
                parent,
                replace(parent_rec, cversion=parent_rec.cversion + 1, num_children=max(0, parent_rec.num_children - 1)),
            )
        txn.delete(path, rec)
        txn.events += [(path, EventType.DELETED), (parent, EventType.CHILDREN)]
