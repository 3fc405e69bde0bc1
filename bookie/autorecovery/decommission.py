"""Decommission a bookie (BookKeeper's ``BookKeeperAdmin.decommissionBookie``).

The bookie must be down or read-only (a writable bookie would get new ensembles while it is
drained). Steps: mark it under ``/ledgers/underreplication/decommission`` (the auditor treats it
as lost at once and marks its ledgers), let the replication workers copy its fragments to other
bookies, and wait until no ledger's metadata names it. With no auditor in the cluster, an
auto-recovery runs in this process meanwhile. Then its cookie is removed (a bookie that is
still registered keeps it) and the decommission mark cleared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import trio

from bookie.autorecovery.errors import DecommissionError
from bookie.autorecovery.underreplication import UnderReplicationManager
from bookie.client.client_context import AVAILABLE_PATH
from bookie.client.ledger_manager import LedgerManager
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from bookie.config import BookieConfig

__all__ = ["decommission_bookie", "ledgers_on"]

POLL_S = 1.0


async def ledgers_on(store: MetadataStore, bookie_id: str) -> list[int]:
    """Ledgers whose metadata names ``bookie_id`` in any ensemble."""
    return [lid async for lid, md in LedgerManager(store).iter_metadata() if bookie_id in md.all_bookies()]


async def decommission_bookie(store: MetadataStore, bookie_id: str, config: "BookieConfig", *,
                              progress: Callable[[int, int], None] | None = None,
                              timeout_s: float | None = None) -> dict[str, object]:
    """Drain ``bookie_id``; ``progress(done, total)`` after every poll. Returns a summary."""
    try:
        writable = set(await store.children(AVAILABLE_PATH))
    except NotFoundError:
        writable = set()
    if bookie_id in writable:
        raise DecommissionError(
            f"bookie {bookie_id} is writable: stop it, or make it read-only (PUT /api/v1/bookie/state/readonly "
            f"{{\"readOnly\": true}}), before decommissioning it")
    urm = UnderReplicationManager(store)
    initial = await ledgers_on(store, bookie_id)
    total = len(initial)
    if not initial and await store.exists(f"/ledgers/cookies/{bookie_id}") is None:
        raise DecommissionError(f"no bookie {bookie_id} is known here (no cookie, no ledger names it): a typo?")
    await urm.decommission(bookie_id)
    ran_locally = False
    with trio.fail_after(timeout_s if timeout_s is not None else float("inf")):
        async with trio.open_nursery() as nursery:
            if await urm.auditor() is None:
                from bookie.autorecovery.service import AutoRecovery

                ran_locally = True
                await nursery.start(AutoRecovery(store, config, name=f"decommission-{bookie_id}").run)
            while True:
                remaining = await ledgers_on(store, bookie_id)
                if progress is not None:
                    progress(total - min(total, len(remaining)), total)
                if not remaining:
                    break
                await trio.sleep(POLL_S)
            nursery.cancel_scope.cancel()
    registered = bookie_id in writable
    try:
        registered = registered or bookie_id in set(await store.children(f"{AVAILABLE_PATH}/readonly"))
    except NotFoundError:
        pass
    cookie_removed = False
    if not registered:
        try:
            await store.delete(f"/ledgers/cookies/{bookie_id}")
            cookie_removed = True
        except NotFoundError:
            pass
        except MetadataError:
            pass
    await urm.clear_decommission(bookie_id)
    return {"bookie": bookie_id, "ledgers": total, "cookie_removed": cookie_removed,
            "ran_autorecovery": ran_locally}
