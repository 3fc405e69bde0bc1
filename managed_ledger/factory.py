"""ManagedLedgerFactory: opens managed ledgers over one metadata store and ledger client.

It owns the process-wide entry cache and a nursery in which every open managed ledger runs
its background tasks (rollover, trimming, cursor flushes); closing the factory closes them.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from managed_ledger.config import MB, ManagedLedgerConfig
from managed_ledger.entry_cache import EntryCacheManager
from managed_ledger.errors import ManagedLedgerClosedError, MetadataUnavailableError
from managed_ledger.ledger import ML_ROOT, ManagedLedger
from managed_ledger.ledger_client import LedgerClient
from managed_ledger.orphan_sweep import run_orphan_sweep
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore

log = logging.getLogger(__name__)


# How long an open waits for a close under way of the same ledger (a topic bounds its close
# at 10 s) before recovering a new instance regardless.
CLOSE_WAIT_ON_REOPEN_S = 15.0

class ManagedLedgerFactory:
    def __init__(self, store: MetadataStore, bk: LedgerClient, config: ManagedLedgerConfig | None = None) -> None:
        self.store = store
        self.bk = bk
        self.config = config or ManagedLedgerConfig()
        self.cache_manager = EntryCacheManager(self.config.cache_size_mb * MB, self.config.cache_eviction_watermark)
        self._ledgers: dict[str, ManagedLedger] = {}
        self._opening: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._closed = False

    async def __aenter__(self) -> "ManagedLedgerFactory":
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        if self.config.orphan_ledger_sweep_interval_s > 0:
            await self._nursery.start(
                run_orphan_sweep, self, self.config.orphan_ledger_sweep_interval_s, self.config.orphan_ledger_min_age_s
            )
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        with trio.CancelScope(shield=True):
            await self.close_all()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        return await self._nursery_cm.__aexit__(*exc)

    @property
    def ledgers(self) -> dict[str, ManagedLedger]:
        return dict(self._ledgers)

    async def open(self, name: str, config: ManagedLedgerConfig | None = None, create_if_missing: bool = True) -> ManagedLedger:
        """Open (recover + fence the previous owner) or return the already open one."""
        if self._closed or self._nursery is None:
            raise ManagedLedgerClosedError("factory is closed (use `async with`)")
        lock = self._opening.setdefault(name, trio.Lock())
        async with lock:
            ml = self._ledgers.get(name)
            if ml is not None:
                if not ml.closing:
                    return ml
                # Being closed (a fenced topic unloading): wait for that close, then recover
                # a new instance; a close that hangs is not waited for forever.
                with trio.move_on_after(CLOSE_WAIT_ON_REOPEN_S):
                    await ml.wait_closed()
                self._forget(ml)
            ml = ManagedLedger(name, config or self.config, self.store, self.bk, self.cache_manager.cache_for(name))
            await self._nursery.start(ml.run)
            try:
                await ml.initialize(create_if_missing=create_if_missing)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await ml.close()
                raise
            ml.on_close = self._forget
            self._ledgers[name] = ml
            return ml

    def _forget(self, ml: ManagedLedger) -> None:
        if self._ledgers.get(ml.name) is ml:
            del self._ledgers[ml.name]

    async def delete(self, name: str) -> None:
        """Delete a managed ledger: its cursors, its ledgers and its metadata."""
        ml = await self.open(name)
        for cursor_name in list(ml.cursors):
            await ml.delete_cursor(cursor_name)
        ledger_ids = [li.ledger_id for li in ml.ledgers]
        await ml.close()
        for ledger_id in ledger_ids:
            await ml.delete_ledger_quietly(ledger_id)
        try:
            await self.store.delete_recursive(ml.path)
        except MetadataError as e:
            raise MetadataUnavailableError(f"{ml.path}: {e}") from e

    async def list_names(self, prefix: str = "") -> list[str]:
        """Names of stored managed ledgers under `prefix` (e.g. ``tenant/ns/persistent``):
        the nodes four levels below /managed-ledgers, like Pulsar's topic names."""
        base = f"{ML_ROOT}/{prefix.strip('/')}".rstrip("/")
        depth = 4 - (len(prefix.strip("/").split("/")) if prefix.strip("/") else 0)
        names: list[str] = []

        async def walk(path: str, rel: str, level: int) -> None:
            try:
                kids = await self.store.children(path)
            except NotFoundError:
                return
            for kid in kids:
                sub = f"{rel}/{kid}" if rel else kid
                if level == 1:
                    names.append(sub)
                else:
                    await walk(f"{path}/{kid}", sub, level - 1)

        if depth <= 0:
            return [prefix.strip("/")] if await self.store.exists(base) else []
        await walk(base, prefix.strip("/"), depth)
        return sorted(names)

    async def close_all(self) -> None:
        self._closed = True
        for ml in list(self._ledgers.values()):
            try:
                await ml.close()
            except Exception as e:  # keep closing the others
                log.warning("closing %s: %s", ml.name, e)
