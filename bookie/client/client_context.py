"""``ClientContext``: what ledger handles and read/recovery ops need of the ledger client.

BookKeeper's ``ClientContext``: the configuration, the ledger manager (metadata CAS), the
placement policy, the connection pool to the bookies, the bookie health table (quarantine) and
the nursery background work runs in. ``BookKeeper`` builds one when it is entered and hands it to
every ``LedgerHandle``, ``LedgerRecoveryOp`` and read op, which therefore never see the
``BookKeeper`` facade (create/open/delete) itself.
"""

from __future__ import annotations

import time
from typing import Awaitable, Callable, Mapping

import trio

from bookie.client.bookie_connection import BookieConnection, BookieConnectionPool, Callback
from bookie.client.config import ClientConfig
from bookie.client.errors import BKClientClosedError, BKError
from bookie.client.ledger_manager import LedgerManager
from bookie.client.local_bookie import LocalBookieConnection, RequestHandler
from bookie.client.placement import EnsemblePlacementPolicy
from bookie.protocol import Request
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore
from metadata.values import unpack

AVAILABLE_PATH = "/ledgers/available"
READONLY_NODE = "readonly"
# Racks bookies declare: /bookies/<id>/rack holds the rack name as UTF-8 text.
RACKS_PATH = "/bookies"
RACKS_REFRESH_S = 10.0


class ClientContext:
    def __init__(self, store: MetadataStore, config: ClientConfig, placement: EnsemblePlacementPolicy,
                 local_bookies: Mapping[str, RequestHandler] | None = None) -> None:
        self.store = store
        self.local_bookies = dict(local_bookies or {})  # reached in process (standalone)
        self.config = config
        self.placement = placement
        self.ledger_manager = LedgerManager(store, config.metadata_update_max_retries)
        self._quarantine: dict[str, float] = {}
        self._nursery: trio.Nursery | None = None
        self._pool: BookieConnectionPool | None = None
        self._racks_read_at = -RACKS_REFRESH_S

    def open(self, nursery: trio.Nursery) -> None:
        """Start serving: connections and background work run in ``nursery``."""
        self._nursery = nursery
        self._pool = BookieConnectionPool(nursery, self.config, self.note_bookie_failure, self.local_bookies,
                                          self.local_socket)

    def close(self) -> None:
        """From here on ``closed``: failing requests no longer start ensemble changes."""
        self._nursery = None
        if self._pool is not None:
            self._pool.close()

    @property
    def closed(self) -> bool:
        return self._nursery is None

    def send(self, bookie_id: str, req: Request, callback: Callback, timeout_s: float) -> None:
        if self._pool is None or self._nursery is None:
            raise BKClientClosedError("the BookKeeper client is not open")
        self._pool.send(bookie_id, req, callback, timeout_s)

    def connection(self, bookie_id: str) -> BookieConnection | LocalBookieConnection:
        """The pooled connection to ``bookie_id`` (stays valid: it reconnects on its next send)."""
        if self._pool is None or self._nursery is None:
            raise BKClientClosedError("the BookKeeper client is not open")
        return self._pool.get(bookie_id)

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        if self._nursery is None:
            raise BKClientClosedError("the BookKeeper client is not open")
        self._nursery.start_soon(fn)

    def note_bookie_failure(self, bookie_id: str) -> None:
        self._quarantine[bookie_id] = time.monotonic() + self.config.bookie_quarantine_time_s

    def quarantined(self) -> set[str]:
        if not self._quarantine:
            return set()
        now = time.monotonic()
        for b in [b for b, until in self._quarantine.items() if until <= now]:
            del self._quarantine[b]
        return set(self._quarantine)

    async def local_socket(self, bookie_id: str) -> str | None:
        """The abstract Unix socket ``bookie_id`` advertises in its registration (writable or
        read-only), or None: none advertised, not registered, or the store cannot say."""
        for path in (f"{AVAILABLE_PATH}/{bookie_id}", f"{AVAILABLE_PATH}/{READONLY_NODE}/{bookie_id}"):
            try:
                data, _ = await self.store.get(path)
            except NotFoundError:
                continue
            except (MetadataError, OSError):
                return None
            try:
                info = unpack(data)
            except ValueError:
                return None
            name = info.get("local_socket") if isinstance(info, dict) else None
            return name if isinstance(name, str) and name else None
        return None

    async def writable_bookies(self) -> list[str]:
        try:
            kids = await self.store.children(AVAILABLE_PATH)
        except NotFoundError:
            return []
        except MetadataError as exc:
            raise BKError(f"cannot list bookies: {exc}") from exc
        return [k for k in kids if k != READONLY_NODE]

    async def refresh_racks(self) -> None:
        """Give a rack-aware placement policy (one with a ``racks`` dict) the declared racks,
        read at most every RACKS_REFRESH_S; a store error keeps the last known map."""
        racks = getattr(self.placement, "racks", None)
        if not isinstance(racks, dict) or time.monotonic() - self._racks_read_at < RACKS_REFRESH_S:
            return
        try:
            names = await self.store.children(RACKS_PATH)
        except NotFoundError:
            names = []
        except MetadataError:
            return
        fresh: dict[str, str] = {}
        for name in names:
            try:
                value, _ = await self.store.get(f"{RACKS_PATH}/{name}/rack")
            except MetadataError:
                continue  # a bookie without a declared rack: the default rack
            rack = value.decode("utf-8", "replace").strip()
            if rack:
                fresh[name] = rack
        racks.clear()
        racks.update(fresh)
        self._racks_read_at = time.monotonic()
