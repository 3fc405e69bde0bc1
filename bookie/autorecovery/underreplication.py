"""Under-replicated ledgers in the metadata store (BookKeeper's ``LedgerUnderreplicationManager``).

Layout under ``/ledgers/underreplication`` (BookKeeper's names; values msgpack):

- ``ledgers/<2/4/4 split>/L<id>``: one node per under-replicated ledger (the same hierarchical
  split as the ledger metadata, ``metadata.ledger_ids.ledger_path`` under this root, so a
  walk lists them ascending with bounded memory). Value: ``{"missing_replicas": [bookie ids],
  "ctime_ms": ms}`` (BookKeeper's ``UnderreplicatedLedgerFormat``: replica, ctime).
- ``locks/urL<10-digit id>``: ephemeral; the replication worker holding a ledger.
- ``auditorelection/auditor``: ephemeral; the elected auditor's id.
- ``decommission/<bookie id>``: persistent; bookies being drained by
  ``quire bookie-shell decommission`` (a quire addition: BookKeeper triggers an audit instead).
- ``lostBookieRecoveryDelay``: seconds as text; when present it overrides the auditor's
  ``lost_bookie_recovery_delay`` at once (BookKeeper's ``shell lostbookierecoverydelay``).
- ``disable``: present while re-replication is paused (``quire bookie-shell autorecovery
  --disable``, e.g. for planned maintenance); the workers wait, the auditor keeps marking.

Every change is a create or a compare-and-set, so auditors and workers in several processes
never lose each other's updates: a mark merges missing replicas into the stored list, and a
worker removes a mark only at the version it replicated (a replica the auditor added meanwhile
keeps it).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bookie.autorecovery.errors import AutoRecoveryError
from metadata.errors import AlreadyExistsError, BadVersionError, MetadataError, NotEmptyError, NotFoundError
from metadata.ledger_ids import iter_ledger_ids, ledger_path
from metadata.store import MetadataStore, WatchCallback
from metadata.values import ValueDecodeError, pack, unpack

__all__ = [
    "UNDERREPLICATION_PATH",
    "LEDGERS_PATH",
    "LOCKS_PATH",
    "AUDITOR_PATH",
    "DECOMMISSION_PATH",
    "DISABLE_PATH",
    "DELAY_PATH",
    "UnderReplicated",
    "UnderReplicationManager",
]

UNDERREPLICATION_PATH = "/ledgers/underreplication"
LEDGERS_PATH = f"{UNDERREPLICATION_PATH}/ledgers"
LOCKS_PATH = f"{UNDERREPLICATION_PATH}/locks"
AUDITOR_PATH = f"{UNDERREPLICATION_PATH}/auditorelection/auditor"
DECOMMISSION_PATH = f"{UNDERREPLICATION_PATH}/decommission"
DISABLE_PATH = f"{UNDERREPLICATION_PATH}/disable"
DELAY_PATH = f"{UNDERREPLICATION_PATH}/lostBookieRecoveryDelay"

_CAS_RETRIES = 20


@dataclass(frozen=True)
class UnderReplicated:
    ledger_id: int
    missing_replicas: frozenset[str]
    ctime_ms: int
    version: int


def _encode(missing: set[str] | frozenset[str], ctime_ms: int) -> bytes:
    return pack({"missing_replicas": sorted(missing), "ctime_ms": ctime_ms})


def _decode(ledger_id: int, data: bytes, version: int) -> UnderReplicated:
    try:
        d = unpack(data)
        missing = frozenset(str(b) for b in d["missing_replicas"])
        ctime = int(d.get("ctime_ms", 0))
    except (ValueDecodeError, KeyError, TypeError, ValueError, AttributeError):
        # An unreadable mark still says "this ledger needs a look": every replica is suspect.
        missing, ctime = frozenset(), 0
    return UnderReplicated(ledger_id, missing, ctime, version)


class UnderReplicationManager:
    """Marks, locks, the auditor's election node and decommission marks, on one store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # -- under-replicated ledgers -----------------------------------------------------------

    @staticmethod
    def path(ledger_id: int) -> str:
        return ledger_path(ledger_id, LEDGERS_PATH)

    async def mark(self, ledger_id: int, missing: set[str]) -> bool:
        """Record ``missing`` replicas of ``ledger_id`` (merged into an existing mark).
        True if the stored mark changed."""
        path = self.path(ledger_id)
        for _ in range(_CAS_RETRIES):
            current = await self.get(ledger_id)
            try:
                if current is None:
                    await self.store.put(path, _encode(missing, int(time.time() * 1000)), -1, make_parents=True)
                    return True
                merged = current.missing_replicas | missing
                if merged == current.missing_replicas:
                    return False
                await self.store.put(path, _encode(merged, current.ctime_ms), current.version)
                return True
            except (AlreadyExistsError, BadVersionError, NotFoundError):
                continue  # raced with another auditor or a worker: read again
        raise AutoRecoveryError(f"ledger {ledger_id}: the under-replication mark kept changing under us")

    async def get(self, ledger_id: int) -> UnderReplicated | None:
        try:
            data, stat = await self.store.get(self.path(ledger_id))
        except NotFoundError:
            return None
        return _decode(ledger_id, data, stat.version)

    async def mark_replicated(self, ledger_id: int, version: int | None = None) -> bool:
        """Remove the mark (at ``version`` if given). False if it changed meanwhile (kept)."""
        try:
            await self.store.delete(self.path(ledger_id), version)
        except NotFoundError:
            return True
        except BadVersionError:
            return False
        return True

    async def ledgers(self) -> AsyncIterator[int]:
        """Under-replicated ledger ids, ascending."""
        async for ledger_id in iter_ledger_ids(self.store, LEDGERS_PATH):
            yield ledger_id

    async def list(self, limit: int | None = None) -> list[UnderReplicated]:
        out: list[UnderReplicated] = []
        async for ledger_id in self.ledgers():
            ur = await self.get(ledger_id)
            if ur is not None:
                out.append(ur)
                if limit is not None and len(out) >= limit:
                    break
        return out

    # -- per-ledger locks (ephemeral: a dead worker's lock goes with its session) ------------

    @staticmethod
    def lock_path(ledger_id: int) -> str:
        return f"{LOCKS_PATH}/urL{ledger_id:010d}"

    async def try_lock(self, ledger_id: int, owner: str) -> bool:
        try:
            await self.store.create(self.lock_path(ledger_id), pack({"owner": owner}), ephemeral=True,
                                    make_parents=True)
        except AlreadyExistsError:
            return False
        return True

    async def is_locked(self, ledger_id: int) -> bool:
        return await self.store.exists(self.lock_path(ledger_id)) is not None

    async def release(self, ledger_id: int) -> None:
        try:
            await self.store.delete(self.lock_path(ledger_id))
        except NotFoundError:
            pass

    # -- decommission marks ------------------------------------------------------------------

    async def decommission(self, bookie_id: str) -> None:
        try:
            await self.store.create(f"{DECOMMISSION_PATH}/{bookie_id}", pack({"ctime_ms": int(time.time() * 1000)}),
                                    make_parents=True)
        except AlreadyExistsError:
            pass

    async def decommissioned(self, watch: WatchCallback | None = None) -> set[str]:
        try:
            return set(await self.store.children(DECOMMISSION_PATH, watch))
        except NotFoundError:
            if watch is not None:
                await self.store.exists(DECOMMISSION_PATH, watch)
            return set()

    async def clear_decommission(self, bookie_id: str) -> None:
        try:
            await self.store.delete(f"{DECOMMISSION_PATH}/{bookie_id}")
        except (NotFoundError, NotEmptyError):
            pass

    # -- pausing re-replication (BookKeeper's disable/enableLedgerReplication) -----------------

    async def set_replication_enabled(self, enabled: bool) -> None:
        try:
            if enabled:
                await self.store.delete(DISABLE_PATH)
            else:
                await self.store.create(DISABLE_PATH, b"", make_parents=True)
        except (NotFoundError, AlreadyExistsError):
            pass  # already so

    async def replication_enabled(self, watch: WatchCallback | None = None) -> bool:
        return await self.store.exists(DISABLE_PATH, watch) is None

    # -- lost bookie recovery delay, changeable at run time --------------------------------------

    async def set_lost_bookie_recovery_delay(self, seconds: int) -> None:
        if seconds < 0:
            raise AutoRecoveryError(f"lost bookie recovery delay must be >= 0, got {seconds}")
        await self.store.put(DELAY_PATH, str(seconds).encode(), None, make_parents=True)

    async def lost_bookie_recovery_delay(self, watch: WatchCallback | None = None) -> int | None:
        """The delay stored in the metadata store (None: the auditor's configured one applies)."""
        stat = await self.store.exists(DELAY_PATH, watch)
        if stat is None:
            return None
        try:
            data, _ = await self.store.get(DELAY_PATH)
            return max(0, int(data.decode().strip()))
        except (NotFoundError, ValueError, UnicodeDecodeError):
            return None

    # -- the auditor's election node ---------------------------------------------------------

    async def auditor(self) -> str | None:
        """The elected auditor's id, or None when no auditor runs."""
        try:
            data, _ = await self.store.get(AUDITOR_PATH)
        except NotFoundError:
            return None
        except MetadataError:
            return None
        try:
            return str(unpack(data)["id"])
        except (ValueDecodeError, KeyError, TypeError):
            return "?"
