"""``BookKeeper``: the ledger client entry point (create / open / delete ledgers).

Owns the nursery every background task of the client runs in (bookie connections, ensemble
changes), the connection pool, the placement policy and the bookie health table that keeps
recently failed bookies out of new ensembles (quarantine). Writable bookies are discovered
from ``/ledgers/available`` (children other than ``readonly``) at each placement.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

import trio

from bookie.client.bookie_connection import BookieConnection, BookieConnectionPool, Callback
from bookie.client.local_bookie import LocalBookieConnection
from bookie.client.config import ClientConfig
from bookie.client.errors import BKClientClosedError, BKError, BKNotEnoughBookiesError, BKUnauthorizedAccessError
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_manager import LedgerManager
from bookie.client.ledger_metadata import LedgerMetadata, master_key, password_hash
from bookie.client.placement import EnsemblePlacementPolicy, load_policy
from bookie.client.read_ops import read_lac
from bookie.client.recovery import LedgerRecoveryOp
from bookie.protocol import Request
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore

__all__ = ["BookKeeper", "AVAILABLE_PATH"]

AVAILABLE_PATH = "/ledgers/available"
READONLY_NODE = "readonly"


class BookKeeper:
    """Use as ``async with BookKeeper(store, config) as bk:``."""

    def __init__(self, store: MetadataStore, config: ClientConfig | None = None, *,
                 placement: EnsemblePlacementPolicy | None = None) -> None:
        self.store = store
        self.config = config or ClientConfig()
        self.placement = placement or load_policy(self.config.ensemble_placement_policy)
        self.ledger_manager = LedgerManager(store, self.config.metadata_update_max_retries)
        self._quarantine: dict[str, float] = {}
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._pool: BookieConnectionPool | None = None

    async def __aenter__(self) -> "BookKeeper":
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._pool = BookieConnectionPool(self._nursery, self.config, self.note_bookie_failure)
        return self

    async def __aexit__(self, *exc: object) -> bool:
        await self.close()
        return False

    async def close(self) -> None:
        if self._nursery is None:
            return
        nursery, cm = self._nursery, self._nursery_cm
        self._nursery = None  # from here on `closed`: failing requests no longer start ensemble changes
        if self._pool is not None:
            self._pool.close()
        nursery.cancel_scope.cancel()
        # The body's exception (if any) propagates from __aexit__ unwrapped; only a failure
        # of a background task surfaces here.
        await cm.__aexit__(None, None, None)

    # -- plumbing used by handles and ops ----------------------------------------------------

    def send(self, bookie_id: str, req: Request, callback: Callback, timeout_s: float) -> None:
        if self._pool is None or self._nursery is None:
            raise BKClientClosedError("the BookKeeper client is not open")
        self._pool.send(bookie_id, req, callback, timeout_s)

    def connection(self, bookie_id: str) -> BookieConnection | LocalBookieConnection:
        """The pooled connection to ``bookie_id`` (stays valid: it reconnects on its next send)."""
        if self._pool is None or self._nursery is None:
            raise BKClientClosedError("the BookKeeper client is not open")
        return self._pool.get(bookie_id)

    @property
    def closed(self) -> bool:
        return self._nursery is None

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

    async def writable_bookies(self) -> list[str]:
        try:
            kids = await self.store.children(AVAILABLE_PATH)
        except NotFoundError:
            return []
        except MetadataError as exc:
            raise BKError(f"cannot list bookies: {exc}") from exc
        return [k for k in kids if k != READONLY_NODE]

    # -- contract API ------------------------------------------------------------------------

    async def create_ledger(self, ensemble_size: int, write_quorum: int, ack_quorum: int, password: bytes = b"",
                            custom_metadata: dict[str, bytes] | None = None) -> LedgerHandle:
        if not 1 <= ack_quorum <= write_quorum <= ensemble_size:
            raise BKError(f"need 1 <= ack quorum ({ack_quorum}) <= write quorum ({write_quorum}) "
                          f"<= ensemble size ({ensemble_size})")
        writable = await self.writable_bookies()
        ensemble = self.placement.new_ensemble(ensemble_size, writable, set(), self.quarantined())
        if len(set(ensemble)) != ensemble_size or not set(ensemble) <= set(writable):
            raise BKNotEnoughBookiesError(
                f"placement gave {list(ensemble)} for an ensemble of {ensemble_size} from {sorted(writable)}")
        md = LedgerMetadata(
            ensemble_size=ensemble_size,
            write_quorum_size=write_quorum,
            ack_quorum_size=ack_quorum,
            ensembles=((0, tuple(ensemble)),),
            password_hash=password_hash(password),
            ctime_ms=int(time.time() * 1000),
            custom_metadata=dict(custom_metadata or {}),
        )
        ledger_id, version = await self.ledger_manager.create(md)
        return LedgerHandle(self, ledger_id, md, version, master_key=master_key(password), writable=True)

    async def open_ledger(self, ledger_id: int, password: bytes = b"", recovery: bool = True) -> LedgerHandle:
        """A read-only handle. With ``recovery`` an OPEN ledger is fenced, recovered and closed
        first (BKLedgerRecoveryError if that cannot be decided yet: retry later)."""
        md, version = await self.ledger_manager.read(ledger_id)
        if md.password_hash != password_hash(password):
            raise BKUnauthorizedAccessError(f"wrong password for ledger {ledger_id}")
        key = master_key(password)
        if recovery and not md.is_closed:
            md, version = await LedgerRecoveryOp(self, ledger_id, (md, version), key).run()
        handle = LedgerHandle(self, ledger_id, md, version, master_key=key, writable=False)
        if not md.is_closed:
            try:
                res = await read_lac(self, ledger_id, md, fence=False, master_key=key)
                handle._lac = res.lac
            except BKError:
                pass  # a reader can still call read_last_add_confirmed() later
        return handle

    async def delete_ledger(self, ledger_id: int) -> None:
        await self.ledger_manager.remove(ledger_id)

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        return (await self.ledger_manager.read(ledger_id))[0]
