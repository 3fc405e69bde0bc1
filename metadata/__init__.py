"""The metadata store: ZooKeeper-style hierarchical, versioned nodes with sessions.

`open_store(url)` picks the backend by URL scheme:
  ``zk://host:port[,host:port...][/chroot]``  real ZooKeeper (clusters)
  ``rocksdb:///abs/path``                      embedded RocksDB (standalone; shared per process)
  ``memory://[name]``                          in-process (unit tests, tools)
The interface is `metadata.store.MetadataStore`; errors are in `metadata.errors`.
"""

from __future__ import annotations

from urllib.parse import unquote

from metadata.errors import MetadataError
from metadata.store import MAX_VALUE_SIZE, EventType, MetadataStore, Stat, WatchEvent

__all__ = ["open_store", "parse_url", "MetadataStore", "Stat", "EventType", "WatchEvent", "MAX_VALUE_SIZE"]


def parse_url(url: str) -> tuple[str, str, str]:
    """Split a store URL into (scheme, location, chroot/path).

    zk://h1:2181,h2:2181/quire -> ("zk", "h1:2181,h2:2181", "/quire");
    rocksdb:///var/quire/meta  -> ("rocksdb", "", "/var/quire/meta");
    memory://name              -> ("memory", "name", "").
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise MetadataError(f"metadata URL needs a scheme (zk://, rocksdb://, memory://): {url!r}")
    scheme = scheme.lower()
    if scheme in ("zk", "zookeeper", "zk+hierarchical"):
        hosts, slash, chroot = rest.partition("/")
        if not hosts:
            raise MetadataError(f"zk URL needs host:port: {url!r}")
        chroot = "/" + chroot if slash else ""
        return "zk", hosts, chroot.rstrip("/") if chroot != "/" else ""
    if scheme == "rocksdb":
        host, slash, path = rest.partition("/")
        if host or not slash or not path:
            raise MetadataError(f"rocksdb URL must be rocksdb:///absolute/path: {url!r}")
        return "rocksdb", "", "/" + unquote(path)
    if scheme == "memory":
        return "memory", rest.strip("/"), ""
    raise MetadataError(f"unknown metadata URL scheme {scheme!r} in {url!r}")


async def open_store(url: str, *, session_timeout_s: float = 30.0, operation_timeout_s: float = 10.0) -> MetadataStore:
    """Open a session on the store at `url` (must be called inside trio); close it when done."""
    scheme, location, path = parse_url(url)
    if scheme == "zk":
        from metadata.zk_store import ZooKeeperStore

        return await ZooKeeperStore.connect(
            location, path, session_timeout_s=session_timeout_s, operation_timeout_s=operation_timeout_s
        )
    if scheme == "rocksdb":
        from metadata.rocksdb_store import open_rocksdb_store

        return await open_rocksdb_store(path)
    from metadata.memory_store import open_memory_store

    return open_memory_store(location)
