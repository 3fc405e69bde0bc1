"""Orphan-ledger sweep: ledgers a managed ledger created but no longer references.

A ledger whose deletion failed (bookies or metadata store unreachable when the trim or the
rollover cleanup ran) would otherwise stay forever, and bookie GC can never reclaim it. Every
data ledger carries ``pulsar/managed-ledger = <name>`` in its custom metadata, every cursor
ledger ``pulsar/cursor = <cursor path>``. One pass lists every ledger in the metadata store
and deletes those that

* are tagged with a managed ledger (or a cursor of one) that is open in this factory,
* are in neither the ledger list stored in that managed ledger's metadata node (the truth,
  whoever owns it now: a broker that lost ownership without noticing has a stale list) nor
  the list this broker holds; for a cursor ledger, it is not the ledger named by the
  cursor's node nor the one the open cursor writes,
* and were created more than ``min_age_s`` ago: a ledger created a moment ago may not be in
  the list yet (created, then the list is written), so young ledgers are never candidates.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from bookie.client.ledger_metadata import decode_metadata
from managed_ledger.formats import decode_cursor_info, decode_ml_info
from managed_ledger.ledger import ML_ROOT
from metadata.errors import MetadataError, NotFoundError
from metadata.ledger_ids import iter_ledger_ids, ledger_path
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from managed_ledger.factory import ManagedLedgerFactory

log = logging.getLogger(__name__)

ML_TAG = "pulsar/managed-ledger"
CURSOR_TAG = "pulsar/cursor"


def _references(factory: "ManagedLedgerFactory") -> tuple[dict[str, set[int]], dict[str, tuple[str, set[int]]]]:
    """(managed ledger name -> referenced data ledgers, cursor path -> (ml name, its ledgers))."""
    data: dict[str, set[int]] = {}
    cursors: dict[str, tuple[str, set[int]]] = {}
    for name, ml in factory.ledgers.items():
        ids = {li.ledger_id for li in ml.ledgers}
        ids.add(ml.current_ledger_id)
        data[name] = ids
        for cursor in list(ml.cursors.values()):
            refs = {cursor.store.node_ledger_id}
            handle = cursor.store.ledger
            if handle is not None:
                refs.add(handle.ledger_id)
            cursors[cursor.path] = (name, refs)
    return data, cursors


async def sweep_orphan_ledgers(factory: "ManagedLedgerFactory", min_age_s: float) -> list[int]:
    """One pass; returns the ids of the ledgers deleted."""
    store = factory.store
    before = _references(factory)
    deleted: list[int] = []
    now_ms = time.time() * 1000
    async for ledger_id in iter_ledger_ids(store):
        try:
            raw, _ = await store.get(ledger_path(ledger_id))
            md = decode_metadata(raw)
        except NotFoundError:
            continue
        except (MetadataError, ValueError, KeyError, TypeError):
            continue  # not ours to judge
        if md.ctime_ms <= 0 or now_ms - md.ctime_ms < min_age_s * 1000:
            continue
        owner = _owner(md.custom_metadata, before)
        if owner is None:
            continue
        # Look again now: the list may have grown while we walked (a rollover).
        data, cursors = _references(factory)
        kind, key = owner
        refs = data.get(key) if kind == "ml" else (cursors.get(key) or (None, None))[1]
        if refs is None or ledger_id in refs or await _stored_reference(store, kind, key, ledger_id):
            continue
        log.warning("deleting orphan ledger %d of %s %s (created %.0f s ago, not referenced)",
                    ledger_id, "managed ledger" if kind == "ml" else "cursor", key, (now_ms - md.ctime_ms) / 1000)
        try:
            await factory.bk.delete_ledger(ledger_id)
        except Exception as exc:  # retried by the next pass
            log.warning("orphan ledger %d not deleted (next pass retries): %s", ledger_id, exc)
            continue
        deleted.append(ledger_id)
    return deleted


async def _stored_reference(store: MetadataStore, kind: str, key: str, ledger_id: int) -> bool:
    """Whether the metadata node of the managed ledger / cursor names the ledger. True
    (keep it) when the node cannot be read: never delete on a doubt."""
    try:
        if kind == "ml":
            raw, _ = await store.get(f"{ML_ROOT}/{key}")
            return any(li.ledger_id == ledger_id for li in decode_ml_info(raw).ledgers)
        raw, _ = await store.get(key)
        return decode_cursor_info(raw).cursors_ledger_id == ledger_id
    except Exception:
        return True


def _owner(custom: dict[str, bytes], refs: tuple[dict[str, set[int]], dict[str, Any]]) -> tuple[str, str] | None:
    data, cursors = refs
    name = custom.get(ML_TAG)
    if name is not None:
        key = name.decode("utf-8", "replace")
        return ("ml", key) if key in data else None
    path = custom.get(CURSOR_TAG)
    if path is not None:
        key = path.decode("utf-8", "replace")
        return ("cursor", key) if key in cursors else None
    return None


async def run_orphan_sweep(factory: "ManagedLedgerFactory", interval_s: float, min_age_s: float,
                           *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Sweep every ``interval_s`` until cancelled (owned by the factory's nursery)."""
    task_status.started()
    while True:
        await trio.sleep(interval_s)
        try:
            await sweep_orphan_ledgers(factory, min_age_s)
        except Exception:
            log.exception("orphan ledger sweep failed; next pass retries")
