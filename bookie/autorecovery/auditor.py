"""The auditor (BookKeeper's ``Auditor``): one per cluster, elected through an ephemeral node.

Every auto-recovery process runs :meth:`Auditor.run`: it tries to create
``/ledgers/underreplication/auditorelection/auditor`` (ephemeral); the one that succeeds is the
auditor until its metadata session ends, the others watch the node and take over when it goes.

The elected auditor watches the registered bookies (``/ledgers/available`` and its
``readonly`` child) and the decommission marks. A bookie that disappears is *missing* from that
moment; once it has been missing for ``lost_bookie_recovery_delay`` seconds (the value at
``/ledgers/underreplication/lostBookieRecoveryDelay`` overrides it at run time), or at once when
it is decommissioned, it is *lost*, and an audit marks every ledger whose ensembles name it
under-replicated (``UnderReplicationManager.mark``), then kicks the local replication worker.
A bookie that comes back before the delay is forgotten. The audit walks every ledger's
metadata, so it also finds bookies that vanished while no auditor ran (their delay starts when
the auditor first sees them missing); it runs when the auditor is elected, whenever a bookie
becomes lost or is decommissioned, and every ``auditor_periodic_bookie_check_interval`` seconds.

Every ``auditor_periodic_check_interval`` seconds the auditor also checks the entries: for each
closed ledger, each fragment's first and last entry are read from the live bookie that should
hold them; a bookie that answers NO_ENTRY/NO_LEDGER is recorded as a missing replica (it lost
data without losing its registration, e.g. a disk replaced under the same id).

Between events it refreshes the under-replication metrics every ``METRICS_REFRESH_S``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

import trio

from bookie.autorecovery.fragment_replicator import fragment_lacks_entries, fragments_on
from bookie.autorecovery.metrics import LISTED_LEDGERS_MAX, AutoRecoveryMetrics
from bookie.autorecovery.underreplication import AUDITOR_PATH, DECOMMISSION_PATH, DELAY_PATH, UnderReplicationManager
from bookie.client.client_context import AVAILABLE_PATH
from bookie.client.errors import BKError
from metadata.errors import AlreadyExistsError, MetadataError, NotFoundError
from metadata.store import WatchEvent
from metadata.values import pack, unpack

if TYPE_CHECKING:
    from bookie.client.bookkeeper import BookKeeper
    from bookie.config import BookieConfig

__all__ = ["Auditor", "METRICS_REFRESH_S"]

log = logging.getLogger(__name__)

METRICS_REFRESH_S = 5.0
_ELECTION_POLL_S = 5.0  # also re-check the election node this often (a watch is the fast path)


class Auditor:
    def __init__(self, bk: "BookKeeper", config: "BookieConfig", metrics: AutoRecoveryMetrics, auditor_id: str,
                 on_marked: Callable[[], None] | None = None) -> None:
        self.bk = bk
        self.store = bk.store
        self.config = config
        self.metrics = metrics
        self.auditor_id = auditor_id
        self.on_marked = on_marked
        self.urm = UnderReplicationManager(bk.store)
        self.is_auditor = False
        self.audits = 0
        self._session_lost = trio.Event()
        self._changed = trio.Event()
        self._armed: set[str] = set()  # paths with a watch registered and not fired yet
        # bookie -> monotonic time it was first seen missing
        self.missing_since: dict[str, float] = {}
        # lost_bookie_recovery_delay, or the one stored at DELAY_PATH (read by the audit loop)
        self.delay = max(0, config.lost_bookie_recovery_delay)

    # -- election -------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.store.on_session_lost(lambda: self._session_lost.set())
        task_status.started()
        while True:
            self._session_lost = trio.Event()
            try:
                elected = await self._elect()
            except MetadataError as exc:
                log.warning("auditor election failed (retrying): %s", exc)
                await trio.sleep(1.0)
                continue
            if not elected:
                gone = trio.Event()
                try:
                    await self.store.exists(AUDITOR_PATH, lambda _ev: gone.set())
                except MetadataError:
                    pass
                with trio.move_on_after(_ELECTION_POLL_S):
                    await gone.wait()
                continue
            log.info("%s is the auditor", self.auditor_id)
            self.is_auditor = True
            self.metrics.is_auditor.set(1)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._stop_on_session_loss, nursery.cancel_scope)
                    await self._audit_loop()
                log.warning("%s lost its metadata session: no longer the auditor", self.auditor_id)
            except* (MetadataError, BKError) as group:
                # e.g. ZooKeeper unreachable for a while: step down (our node goes with the
                # session if it ends) and stand again
                log.warning("auditor %s stepping down: %s", self.auditor_id, group.exceptions[0])
                await self._step_down()
            finally:
                self.is_auditor = False
                self.metrics.is_auditor.set(0)
                self._armed.clear()  # the watches belonged to the old session's view

    async def _step_down(self) -> None:
        with trio.CancelScope(shield=True):
            try:
                data, stat = await self.store.get(AUDITOR_PATH)
                if unpack(data).get("id") == self.auditor_id:
                    await self.store.delete(AUDITOR_PATH, stat.version)
            except (MetadataError, AttributeError):
                pass
        await trio.sleep(1.0)

    async def _stop_on_session_loss(self, scope: trio.CancelScope) -> None:
        await self._session_lost.wait()
        scope.cancel()

    async def _elect(self) -> bool:
        try:
            await self.store.create(AUDITOR_PATH, pack({"id": self.auditor_id}), ephemeral=True, make_parents=True)
            return True
        except AlreadyExistsError:
            pass
        try:
            data, _ = await self.store.get(AUDITOR_PATH)
            return bool(unpack(data).get("id") == self.auditor_id)  # ours, from before a reconnect
        except (MetadataError, AttributeError):
            return False

    # -- the auditor's loop ---------------------------------------------------------------------

    def _watch(self, path: str) -> Callable[[WatchEvent], None] | None:
        if path in self._armed:
            return None
        self._armed.add(path)

        def fired(_ev: WatchEvent) -> None:
            self._armed.discard(path)
            self._changed.set()

        return fired

    async def _registered(self) -> set[str]:
        out: set[str] = set()
        for path in (AVAILABLE_PATH, f"{AVAILABLE_PATH}/readonly"):
            try:
                out |= {b for b in await self.store.children(path, self._watch(path)) if b != "readonly"}
            except NotFoundError:
                self._armed.discard(path)
                await self.store.exists(path, self._watch(path))
        return out

    async def _audit_loop(self) -> None:
        cfg = self.config
        bookie_every = cfg.auditor_periodic_bookie_check_interval
        check_every = cfg.auditor_periodic_check_interval
        now = time.monotonic()
        next_bookie_check = now + bookie_every if bookie_every > 0 else float("inf")
        next_check = now + check_every if check_every > 0 else float("inf")
        audited: set[str] | None = None  # the lost bookies the last audit covered (None: none ran)
        last_registered: set[str] | None = None
        while True:
            self._changed = trio.Event()
            registered = await self._registered()
            decommissioned = await self.urm.decommissioned(self._watch(DECOMMISSION_PATH))
            stored = await self.urm.lost_bookie_recovery_delay(self._watch(DELAY_PATH))
            delay = self.delay = max(0, cfg.lost_bookie_recovery_delay if stored is None else stored)
            now = time.monotonic()
            if last_registered is not None:
                for b in last_registered - registered:
                    self.missing_since.setdefault(b, now)
                    log.warning("bookie %s is gone; re-replicating its ledgers in %d s unless it returns", b, delay)
            for b in registered & set(self.missing_since):
                log.info("bookie %s is back", b)
                del self.missing_since[b]
            last_registered = registered
            lost = self._lost(now, delay) | decommissioned
            self.metrics.lost_bookies.set(len(lost))
            if audited is None or not lost <= audited or now >= next_bookie_check:
                await self.audit(registered, decommissioned)
                audited = self._lost(time.monotonic(), delay) | decommissioned
                if now >= next_bookie_check:
                    next_bookie_check = now + bookie_every
            if now >= next_check:
                await self.check_entries(registered)
                next_check = now + check_every
            await self.refresh_metrics()
            wake = min([t + delay for b, t in self.missing_since.items() if b not in lost]
                       + [next_bookie_check, next_check, time.monotonic() + METRICS_REFRESH_S])
            with trio.move_on_at(wake):
                await self._changed.wait()

    def _lost(self, now: float, delay: float) -> set[str]:
        return {b for b, t in self.missing_since.items() if now - t >= delay}

    # -- audits ---------------------------------------------------------------------------------

    async def audit(self, registered: set[str], decommissioned: set[str]) -> int:
        """Mark every ledger with a replica on a lost or decommissioned bookie; returns how many
        marks changed. Bookies found missing here start their delay now."""
        delay = self.delay
        now = time.monotonic()
        marked = 0
        referenced: set[str] = set()
        async for ledger_id, md in self.bk.ctx.ledger_manager.iter_metadata(_log_unreadable):
            bad = set()
            referenced |= md.all_bookies()
            for b in md.all_bookies():
                if b in decommissioned:
                    bad.add(b)
                elif b not in registered and now - self.missing_since.setdefault(b, now) >= delay:
                    bad.add(b)
            if bad and await self.urm.mark(ledger_id, bad):
                marked += 1
                log.info("ledger %d under-replicated: %s lost", ledger_id, sorted(bad))
        for b in set(self.missing_since) - referenced:
            del self.missing_since[b]  # no ledger names it any more: nothing left to recover
        self.audits += 1
        self.metrics.audits.inc()
        if marked:
            self.metrics.marked_ledgers.inc(marked)
            if self.on_marked is not None:
                self.on_marked()
        return marked

    async def check_entries(self, registered: set[str]) -> int:
        """For each closed ledger, read each fragment's first and last entry from the live bookie
        that should hold them; mark the replicas that answer they do not have them."""
        marked = 0
        async for ledger_id, md in self.bk.ctx.ledger_manager.iter_metadata(_log_unreadable):
            if not md.is_closed:
                continue
            bad: set[str] = set()
            for frag in fragments_on(md, registered):
                if frag.bookie not in bad and await fragment_lacks_entries(self.bk.ctx, ledger_id, md, frag):
                    bad.add(frag.bookie)
            if bad and await self.urm.mark(ledger_id, bad):
                marked += 1
                log.warning("ledger %d: %s lost entries they should hold", ledger_id, sorted(bad))
        if marked and self.on_marked is not None:
            self.on_marked()
        return marked

    async def refresh_metrics(self) -> None:
        marks: dict[int, int] = {}
        total = 0
        try:
            async for ledger_id in self.urm.ledgers():
                total += 1
                if len(marks) < LISTED_LEDGERS_MAX:
                    mark = await self.urm.get(ledger_id)
                    marks[ledger_id] = len(mark.missing_replicas) if mark is not None else 0
        except MetadataError as exc:
            log.warning("cannot list under-replicated ledgers: %s", exc)
            return
        self.metrics.list_under_replicated(marks, total)


def _log_unreadable(ledger_id: int, exc: BKError) -> None:
    log.warning("audit: cannot read ledger %d: %s", ledger_id, exc)
