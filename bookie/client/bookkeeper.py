"""``BookKeeper``: the ledger client entry point (create / open / delete ledgers).

Owns the nursery every background task of the client runs in (bookie connections, ensemble
changes) and the ``ClientContext`` (``client_context.py``) handles and ops get instead of this
facade: the connection pool, the placement policy and the bookie health table that keeps
recently failed bookies out of new ensembles (quarantine). Writable bookies are discovered
from ``/ledgers/available`` (children other than ``readonly``) at each placement.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import trio

from bookie.client.bookie_connection import BookieConnection
from bookie.client.client_context import AVAILABLE_PATH, ClientContext
from bookie.client.local_bookie import LocalBookieConnection, RequestHandler
from bookie.client.config import ClientConfig
from bookie.client.errors import BKError, BKNotEnoughBookiesError, BKUnauthorizedAccessError
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_metadata import LedgerMetadata, master_key, password_hash
from bookie.client.placement import EnsemblePlacementPolicy, load_policy
from bookie.client.read_ops import read_lac
from bookie.client.recovery import LedgerRecoveryOp
from metadata.store import MetadataStore

__all__ = ["BookKeeper", "AVAILABLE_PATH"]



class BookKeeper:
    """Use as ``async with BookKeeper(store, config) as bk:``."""

    def __init__(self, store: MetadataStore, config: ClientConfig | None = None, *,
                 placement: EnsemblePlacementPolicy | None = None,
                 local_bookies: Mapping[str, RequestHandler] | None = None) -> None:
        """``local_bookies``: bookies running in this process (``quire standalone``), reached
        through their request processors instead of a socket."""
        self.store = store
        self.config = config or ClientConfig()
        self.placement = placement or load_policy(self.config.ensemble_placement_policy)
        # What handles and ops get instead of this facade.
        self.ctx = ClientContext(store, self.config, self.placement, local_bookies)
        self.ledger_manager = self.ctx.ledger_manager
        self._nursery_cm: Any = None

    async def __aenter__(self) -> "BookKeeper":
        self._nursery_cm = trio.open_nursery()
        self.ctx.open(await self._nursery_cm.__aenter__())
        return self

    async def __aexit__(self, *exc: object) -> bool:
        await self.close()
        return False

    async def close(self) -> None:
        nursery = self.ctx._nursery
        if nursery is None:
            return
        self.ctx.close()
        nursery.cancel_scope.cancel()
        # The body's exception (if any) propagates from __aexit__ unwrapped; only a failure
        # of a background task surfaces here.
        await self._nursery_cm.__aexit__(None, None, None)

    # -- the context's plumbing, for tools and tests -------------------------------------------

    @property
    def closed(self) -> bool:
        return self.ctx.closed

    def connection(self, bookie_id: str) -> BookieConnection | LocalBookieConnection:
        return self.ctx.connection(bookie_id)

    def quarantined(self) -> set[str]:
        return self.ctx.quarantined()

    async def writable_bookies(self) -> list[str]:
        return await self.ctx.writable_bookies()

    # -- contract API ------------------------------------------------------------------------

    async def create_ledger(self, ensemble_size: int, write_quorum: int, ack_quorum: int, password: bytes = b"",
                            custom_metadata: dict[str, bytes] | None = None) -> LedgerHandle:
        if not 1 <= ack_quorum <= write_quorum <= ensemble_size:
            raise BKError(f"need 1 <= ack quorum ({ack_quorum}) <= write quorum ({write_quorum}) "
                          f"<= ensemble size ({ensemble_size})")
        writable = await self.ctx.writable_bookies()
        await self.ctx.refresh_racks()
        ensemble = self.placement.new_ensemble(ensemble_size, writable, set(), self.ctx.quarantined())
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
        return LedgerHandle(self.ctx, ledger_id, md, version, master_key=master_key(password), writable=True)

    async def open_ledger(self, ledger_id: int, password: bytes = b"", recovery: bool = True) -> LedgerHandle:
        """A read-only handle. With ``recovery`` an OPEN ledger is fenced, recovered and closed
        first (BKLedgerRecoveryError if that cannot be decided yet: retry later)."""
        md, version = await self.ledger_manager.read(ledger_id)
        if md.password_hash != password_hash(password):
            raise BKUnauthorizedAccessError(f"wrong password for ledger {ledger_id}")
        key = master_key(password)
        if recovery and not md.is_closed:
            md, version = await LedgerRecoveryOp(self.ctx, ledger_id, (md, version), key).run()
        handle = LedgerHandle(self.ctx, ledger_id, md, version, master_key=key, writable=False)
        if not md.is_closed:
            try:
                res = await read_lac(self.ctx, ledger_id, md, fence=False, master_key=key)
                handle._lac = res.lac
            except BKError:
                pass  # a reader can still call read_last_add_confirmed() later
        return handle

    async def delete_ledger(self, ledger_id: int) -> None:
        await self.ledger_manager.remove(ledger_id)

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        return (await self.ledger_manager.read(ledger_id))[0]
