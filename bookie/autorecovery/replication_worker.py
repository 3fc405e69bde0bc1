"""The replication worker (BookKeeper's ``ReplicationWorker``).

Loop: walk the under-replicated ledgers, take one under its lock (an ephemeral node, so two
workers never copy the same ledger and a dead worker's lock goes with its session), and:

1. Decide which of the mark's missing replicas are really lost: decommissioned, or not
   registered (writable or read-only). A bookie that came back holds its entries again.
2. An open ledger whose *last* segment has a lost bookie: its writer, if alive, replaces the
   bookie itself at its next add (ensemble change). If the ledger is still open
   ``open_ledger_rereplication_grace_period`` ms after this worker first saw it, the writer is
   presumed dead: the ledger is recovered (fenced and closed, ``open_ledger(recovery=True)``)
   and its last segment becomes an ordinary fragment. The earlier segments are immutable and
   are re-replicated at once either way.
3. For every fragment on a lost bookie: a new bookie from the placement policy (not in that
   ensemble, rack-aware when racks are declared), copy the entries
   (:mod:`bookie.autorecovery.fragment_replicator`), then compare-and-set that one slot of that
   one segment in the ledger metadata (a conflicting update is re-read and the slot replaced in
   the fresh value; a slot someone else already replaced is left alone).
4. Nothing on a lost bookie left: remove the mark, at the version read in step 1 (a replica the
   auditor added meanwhile keeps it for the next pass).

A failure (no replica answered, no writable bookie, unknown password) leaves the mark and
retries the ledger after ``rw_rereplicate_backoff_ms``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from bookie.autorecovery.errors import AutoRecoveryError, NoLedgerPasswordError, ReplicationError
from bookie.autorecovery.fragment_replicator import Fragment, copy_fragment, fragment_lacks_entries, fragments_on
from bookie.autorecovery.metrics import AutoRecoveryMetrics
from bookie.autorecovery.underreplication import DISABLE_PATH, UnderReplicationManager
from bookie.client.client_context import AVAILABLE_PATH
from bookie.client.errors import BKError, BKNoSuchLedgerError
from bookie.client.ledger_manager import Versioned
from bookie.client.ledger_metadata import LedgerMetadata, master_key, password_hash
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from bookie.client.bookkeeper import BookKeeper
    from bookie.config import BookieConfig

__all__ = ["ReplicationWorker", "registered_bookies"]

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0  # between walks of the marks when nobody kicks the worker
LEDGERS_IN_PARALLEL = 4


async def registered_bookies(store: MetadataStore) -> set[str]:
    """Bookies registered writable or read-only under /ledgers/available."""
    out: set[str] = set()
    for path in (AVAILABLE_PATH, f"{AVAILABLE_PATH}/readonly"):
        try:
            out |= {b for b in await store.children(path) if b != "readonly"}
        except NotFoundError:
            pass
    return out


class ReplicationWorker:
    def __init__(self, bk: "BookKeeper", config: "BookieConfig", metrics: AutoRecoveryMetrics, worker_id: str) -> None:
        self.bk = bk
        self.ctx = bk.ctx
        self.config = config
        self.metrics = metrics
        self.worker_id = worker_id
        self.urm = UnderReplicationManager(bk.store)
        self._kick = trio.Event()
        self._fence_after: dict[int, float] = {}  # open ledgers first seen: fence once past this
        self._retry_after: dict[int, float] = {}  # failed ledgers: back-off

    def kick(self) -> None:
        """New marks exist: walk them now rather than at the next poll."""
        self._kick.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                changed = trio.Event()
                if not await self.urm.replication_enabled(lambda _ev: changed.set()):
                    log.info("re-replication is disabled (%s): waiting", DISABLE_PATH)
                    with trio.move_on_after(POLL_INTERVAL_S * 10):
                        await changed.wait()
                    continue
                await self.run_once()
            except* (MetadataError, BKError) as group:
                log.warning("replication worker: %s (retrying)", group.exceptions[0])
            with trio.move_on_after(POLL_INTERVAL_S):
                await self._kick.wait()
            self._kick = trio.Event()

    async def run_once(self) -> int:
        """One walk over the marked ledgers (up to ``LEDGERS_IN_PARALLEL`` at once: copying one
        overlaps another's metadata round trips); returns how many were fully re-replicated."""
        done = 0
        slots = trio.Semaphore(LEDGERS_IN_PARALLEL)

        async def one(ledger_id: int) -> None:
            nonlocal done
            try:
                done += await self._take(ledger_id)
            finally:
                slots.release()

        async with trio.open_nursery() as nursery:
            async for ledger_id in self.urm.ledgers():
                if self._retry_after.get(ledger_id, 0.0) > time.monotonic():
                    continue
                await slots.acquire()
                nursery.start_soon(one, ledger_id)
        return done

    async def _take(self, ledger_id: int) -> bool:
        """Re-replicate ``ledger_id`` under its lock; True once its mark is gone."""
        if not await self.urm.try_lock(ledger_id, self.worker_id):
            return False  # another worker has it
        try:
            if await self.replicate(ledger_id):
                self._retry_after.pop(ledger_id, None)
                return True
        except (AutoRecoveryError, BKError, MetadataError) as exc:
            self.metrics.failures.inc()
            self._retry_after[ledger_id] = time.monotonic() + self.config.rw_rereplicate_backoff_ms / 1000
            log.warning("re-replication of ledger %d failed, retrying in %d ms: %s", ledger_id,
                        self.config.rw_rereplicate_backoff_ms, exc)
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await self.urm.release(ledger_id)
                except MetadataError:
                    pass  # the lock is ephemeral: it goes with our session at worst
        return False

    # -- one ledger ---------------------------------------------------------------------------

    async def replicate(self, ledger_id: int) -> bool:
        """Re-replicate every fragment of ``ledger_id`` on a lost bookie; True once the mark is gone."""
        mark = await self.urm.get(ledger_id)
        if mark is None:
            return True
        lm = self.ctx.ledger_manager
        try:
            current: Versioned = await lm.read(ledger_id)
        except BKNoSuchLedgerError:
            return await self.urm.mark_replicated(ledger_id)  # deleted meanwhile: nothing to keep
        md = current[0]
        decommissioned = await self.urm.decommissioned()
        registered = await registered_bookies(self.bk.store)
        lost = {b for b in mark.missing_replicas if b in decommissioned or b not in registered}
        lost |= md.all_bookies() & decommissioned
        for b in mark.missing_replicas - lost:
            # registered, yet marked (the auditor's entry check): lost for this ledger only if
            # it really lacks entries it should hold (else it came back with its data)
            if md.is_closed and any([await fragment_lacks_entries(self.ctx, ledger_id, md, f)
                                     for f in fragments_on(md, {b})]):
                lost.add(b)
        if not lost:
            log.info("ledger %d: its missing replicas %s are back; nothing to copy", ledger_id,
                     sorted(mark.missing_replicas))
            return await self._done(ledger_id, mark.version)
        password = self._password(ledger_id, md)
        if not md.is_closed and lost & set(md.last_ensemble):
            current = await self._maybe_fence(ledger_id, current, password)
        for frag in fragments_on(current[0], lost):
            current = await self._replicate_fragment(ledger_id, current, frag, master_key(password), lost)
        md = (await lm.read(ledger_id))[0]
        if fragments_on(md, lost, include_open_tail=True):
            return False  # an open ledger's tail is still waiting for its grace period
        return await self._done(ledger_id, mark.version)

    async def _done(self, ledger_id: int, version: int) -> bool:
        self._fence_after.pop(ledger_id, None)
        if await self.urm.mark_replicated(ledger_id, version):
            self.metrics.rereplicated_ledgers.inc()
            log.info("ledger %d fully replicated", ledger_id)
            return True
        return False  # the auditor added a missing replica meanwhile: next pass

    def _password(self, ledger_id: int, md: LedgerMetadata) -> bytes:
        for pw in self.config.autorecovery_ledger_passwords:
            if password_hash(pw.encode()) == md.password_hash:
                return pw.encode()
        raise NoLedgerPasswordError(
            f"ledger {ledger_id}: none of the {len(self.config.autorecovery_ledger_passwords)} passwords in "
            f"autorecovery_ledger_passwords matches it; its entries cannot be re-replicated")

    async def _maybe_fence(self, ledger_id: int, current: Versioned, password: bytes) -> Versioned:
        """An open ledger lost a bookie of its last ensemble: fence and close it once the grace
        period passed (its writer, if alive, would have replaced the bookie by then)."""
        now = time.monotonic()
        deadline = self._fence_after.setdefault(ledger_id, now + self.config.open_ledger_rereplication_grace_period / 1000)
        if now < deadline:
            return current
        log.warning("ledger %d still open %d ms after losing a bookie of its last ensemble: fencing and "
                    "closing it (its writer is presumed dead)", ledger_id, self.config.open_ledger_rereplication_grace_period)
        await self.bk.open_ledger(ledger_id, password, recovery=True)
        self.metrics.fenced_open_ledgers.inc()
        self._fence_after.pop(ledger_id, None)
        return await self.ctx.ledger_manager.read(ledger_id)

    async def _replicate_fragment(self, ledger_id: int, current: Versioned, frag: Fragment, key: bytes,
                                  lost: set[str]) -> Versioned:
        md = current[0]
        ctx = self.ctx
        writable = await ctx.writable_bookies()
        await ctx.refresh_racks()
        exclude = lost | set(frag.ensemble)
        target = ctx.placement.replace_bookie(frag.ensemble, frag.index, writable, exclude, ctx.quarantined())
        if target in exclude:
            raise ReplicationError(f"placement offered {target} to replace {frag.bookie} in {list(frag.ensemble)}")
        stats = await copy_fragment(ctx, ledger_id, md, frag, target, key, lost,
                                    self.config.rereplication_entry_batch_size)

        def replace(m: LedgerMetadata) -> LedgerMetadata | None:
            try:
                return m.with_replaced_bookie(frag.first, frag.index, frag.bookie, target)
            except ValueError as exc:
                raise ReplicationError(f"ledger {ledger_id}: {exc}") from None

        updated = await ctx.ledger_manager.update(ledger_id, current, replace)
        self.metrics.rereplicated_fragments.inc()
        self.metrics.rereplicated_entries.inc(stats.entries)
        self.metrics.rereplicated_bytes.inc(stats.bytes)
        log.info("ledger %d: entries %d..%d of %s copied to %s (%d entries, %d bytes)", ledger_id, frag.first,
                 frag.last, frag.bookie, target, stats.entries, stats.bytes)
        return updated
