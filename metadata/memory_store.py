"""The `memory://` backend: a LocalTree over plain dicts, for unit tests and tools.

`memory://name` trees live for the whole process, so every session opened on the same name
shares one tree (like clients of one ZooKeeper); `memory://` alone gives a private tree.
"""

from __future__ import annotations

import itertools
import threading

from metadata.local_session import LocalSession
from metadata.local_tree import LocalTree, NodeRecord, NodeTable

_trees: dict[str, LocalTree] = {}
_trees_lock = threading.Lock()


class MemoryNodeTable(NodeTable):
    """Nodes in a dict, children and ephemeral owners in index dicts."""

    blocking = False

    def __init__(self) -> None:
        self._nodes: dict[str, NodeRecord] = {}
        self._children: dict[str, set[str]] = {}
        self._ephemerals: dict[int, set[str]] = {}
        self._session_ids = itertools.count(1)

    def get(self, path: str) -> NodeRecord | None:
        return self._nodes.get(path)

    def children(self, path: str) -> list[str]:
        return sorted(self._children.get(path, ()))

    def commit(self, puts: dict[str, NodeRecord], deletes: dict[str, NodeRecord]) -> None:
        for path, rec in deletes.items():
            self._nodes.pop(path, None)
            parent, _, name = path.rpartition("/")
            self._children.get(parent or "/", set()).discard(name)
            if rec.ephemeral_owner:
                self._ephemerals.get(rec.ephemeral_owner, set()).discard(path)
        for path, rec in puts.items():
            if path not in self._nodes and path != "/":
                parent, _, name = path.rpartition("/")
                self._children.setdefault(parent or "/", set()).add(name)
            self._nodes[path] = rec
            if rec.ephemeral_owner:
                self._ephemerals.setdefault(rec.ephemeral_owner, set()).add(path)

    def ephemerals(self, owner: int | None = None) -> list[str]:
        if owner is None:
            return [p for owned in self._ephemerals.values() for p in owned]
        return list(self._ephemerals.get(owner, ()))

    def next_session_id(self) -> int:
        return next(self._session_ids)


def memory_tree(name: str = "") -> LocalTree:
    """The process-wide tree called `name` (a new private tree if `name` is empty)."""
    if not name:
        return LocalTree(MemoryNodeTable())
    with _trees_lock:
        tree = _trees.get(name)
        if tree is None:
            tree = _trees[name] = LocalTree(MemoryNodeTable())
        return tree


def open_memory_store(name: str = "") -> LocalSession:
    """A new session on the memory tree `name` (must be called inside trio)."""
    return LocalSession(memory_tree(name))
