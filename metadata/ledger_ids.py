"""Ledger ids: allocation and BookKeeper's hierarchical znode layout under `/ledgers`.

Layout (BookKeeper's HierarchicalLedgerManager / LongHierarchicalLedgerManager):
  id < 2^31-1: 10-digit zero pad split 2/4/4      1     -> /ledgers/00/0000/L0001
  larger ids:  19-digit zero pad split 3/4/4/4/4  2^31  -> /ledgers/000/0000/0021/4748/L3648
Both trees share the root; the 2-digit and 3-digit top levels cannot be confused, and every
short id is smaller than every long one, so an in-order walk of the short tree followed by
the long tree lists ids ascending.

Allocation follows ZkLedgerIdGenerator: create `/ledgers/idgen/ID-` ephemeral + sequential;
the server-assigned 10-digit suffix is the id (unique across processes), then delete the node.
ZooKeeper's sequence counter is a signed 32-bit int, so once it reaches 2^31-1 (or wraps) we
switch for good to the long generator, like LongZkLedgerIdGenerator:
`/ledgers/idgen-long/HOB-<high 32 bits>/ID-<low bits>`, the id being ``hob << 32 | low``,
with HOB starting at 1 so long ids never collide with short ones; a HOB whose sequence is
used up is followed by HOB+1. The existence of `/ledgers/idgen-long` is the persistent switch.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from metadata.errors import AlreadyExistsError, NotFoundError
from metadata.store import MetadataStore

LEDGERS_ROOT = "/ledgers"
IDGEN_PATH = "idgen"
IDGEN_LONG_PATH = "idgen-long"
IDGEN_PREFIX = "ID-"
HOB_PREFIX = "HOB-"
SHORT_ID_LIMIT = 2**31 - 1  # Integer.MAX_VALUE: ids below it use the short layout
MAX_LEDGER_ID = 2**63 - 1
# Children of the root that are not part of the ledger trees.
NON_LEDGER_NODES = frozenset(
    {"available", "cookies", "idgen", "idgen-long", "INSTANCEID", "LAYOUT", "underreplication"}
)

_SHORT_SPLIT = (2, 4, 4)
_LONG_SPLIT = (3, 4, 4, 4, 4)
_LEAF = re.compile(r"^L\d{4}$")
_HOB = re.compile(r"^HOB-\d{10}$")


def _split(digits: str, widths: tuple[int, ...]) -> list[str]:
    parts, pos = [], 0
    for width in widths:
        parts.append(digits[pos : pos + width])
        pos += width
    return parts


def ledger_path(ledger_id: int, root: str = LEDGERS_ROOT) -> str:
    """The znode path holding ledger `ledger_id`'s metadata."""
    if not isinstance(ledger_id, int) or isinstance(ledger_id, bool) or not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise ValueError(f"ledger id must be an int in [0, 2^63-1], got {ledger_id!r}")
    if ledger_id < SHORT_ID_LIMIT:
        parts = _split(f"{ledger_id:010d}", _SHORT_SPLIT)
    else:
        parts = _split(f"{ledger_id:019d}", _LONG_SPLIT)
    parts[-1] = "L" + parts[-1]
    return f"{root}/" + "/".join(parts)


def ledger_id_from_path(path: str, root: str = LEDGERS_ROOT) -> int:
    """Inverse of ledger_path; ValueError for anything that is not a ledger znode path."""
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path!r} is not under {root!r}")
    parts = path[len(prefix) :].split("/")
    widths = _SHORT_SPLIT if len(parts) == len(_SHORT_SPLIT) else _LONG_SPLIT
    if len(parts) != len(widths) or not _LEAF.match(parts[-1]):
        raise ValueError(f"{path!r} is not a ledger path")
    parts[-1] = parts[-1][1:]
    for part, width in zip(parts, widths, strict=True):
        if len(part) != width or not part.isdigit() or not part.isascii():
            raise ValueError(f"{path!r} is not a ledger path")
    ledger_id = int("".join(parts))
    if ledger_path(ledger_id, root) != path:  # e.g. a small id spelled in the long layout
        raise ValueError(f"{path!r} is not the canonical path of ledger {ledger_id}")
    return ledger_id


async def _take_sequence(store: MetadataStore, parent: str) -> int:
    """One server-assigned sequence number under `parent` (the node is removed again)."""
    node = await store.create(f"{parent}/{IDGEN_PREFIX}", b"", ephemeral=True, sequential=True, make_parents=True)
    number = int(node.rsplit(IDGEN_PREFIX, 1)[1])  # negative once a 32-bit counter wraps
    try:
        await store.delete(node)
    except NotFoundError:
        pass  # the session ended meanwhile and took the ephemeral node with it
    return number


async def _allocate_long(store: MetadataStore, root: str) -> int:
    base = f"{root}/{IDGEN_LONG_PATH}"
    while True:
        try:
            names = await store.children(base)
        except NotFoundError:
            names = []
        hob = max((int(n[len(HOB_PREFIX) :]) for n in names if _HOB.match(n)), default=1)
        low = await _take_sequence(store, f"{base}/{HOB_PREFIX}{hob:010d}")
        if 0 <= low < SHORT_ID_LIMIT:
            return (hob << 32) | low
        try:  # this HOB's counter is used up: open the next one and retry there
            await store.create(f"{base}/{HOB_PREFIX}{hob + 1:010d}", b"", make_parents=True)
        except AlreadyExistsError:
            pass


async def allocate_ledger_id(store: MetadataStore, root: str = LEDGERS_ROOT) -> int:
    """A new ledger id, unique across every process sharing the store."""
    if await store.exists(f"{root}/{IDGEN_LONG_PATH}") is None:
        ledger_id = await _take_sequence(store, f"{root}/{IDGEN_PATH}")
        if 0 <= ledger_id < SHORT_ID_LIMIT:
            return ledger_id
        try:  # the 32-bit sequence is exhausted: every allocator switches to long ids
            await store.create(f"{root}/{IDGEN_LONG_PATH}", b"", make_parents=True)
        except AlreadyExistsError:
            pass
    return await _allocate_long(store, root)


async def _sorted_children(store: MetadataStore, path: str, width: int, leaf: bool) -> list[str]:
    try:
        names = await store.children(path)
    except NotFoundError:
        return []  # deleted while we walked
    if leaf:
        return sorted(n for n in names if _LEAF.match(n))
    return sorted(n for n in names if len(n) == width and n.isdigit() and n.isascii())


async def _walk(store: MetadataStore, path: str, widths: tuple[int, ...], root: str) -> AsyncIterator[int]:
    leaf = len(widths) == 1
    for name in await _sorted_children(store, path, widths[0], leaf):
        child = f"{path}/{name}"
        if leaf:
            try:
                yield ledger_id_from_path(child, root)
            except ValueError:
                continue  # a stray node that only looks like a ledger
        else:
            async for ledger_id in _walk(store, child, widths[1:], root):
                yield ledger_id


async def iter_ledger_ids(store: MetadataStore, root: str = LEDGERS_ROOT) -> AsyncIterator[int]:
    """Every ledger id with metadata under `root`, ascending (one directory level at a time,
    so memory stays bounded by a directory's size, not the number of ledgers)."""
    root = root.rstrip("/") or "/"
    async for ledger_id in _walk(store, root, _SHORT_SPLIT, root):
        yield ledger_id
    async for ledger_id in _walk(store, root, _LONG_SPLIT, root):
        yield ledger_id
