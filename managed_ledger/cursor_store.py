"""Where one durable cursor's state lives: its cursor ledger and its metadata node.

A ``ManagedCursor`` keeps the acknowledgement state (mark-delete, deleted ranges, batch ack
sets); this module persists snapshots of it, as Pulsar's ManagedCursorImpl does: one
``PositionInfo`` record appended to the cursor's own ledger per flush, the ledger rolled after
``metadata_max_entries_per_ledger`` records or ``ledger_rollover_timeout_s``, and the node
``/managed-ledgers/<ml>/<cursor>`` (a ``CursorInfo``) pointing at the current cursor ledger. The
node is the fallback when no cursor ledger can be written and the home of small states on
close. Every node write is a compare-and-set: losing one means another owner took over, and
the managed ledger is fenced.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

import trio

from bookie.client.errors import BKDigestMismatchError, BKError, BKNoSuchEntryError, BKNoSuchLedgerError
from managed_ledger.errors import (
    CursorNotFoundError,
    CursorPersistError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    MetadataUnavailableError,
)
from managed_ledger.formats import (
    CursorInfo,
    FormatError,
    PositionInfo,
    decode_cursor_info,
    decode_position_info,
    encode_cursor_info,
    encode_position_info,
)
from managed_ledger.ledger_client import LedgerHandleView, close_quietly
from metadata.errors import AlreadyExistsError, BadVersionError, MetadataError, NotFoundError

if TYPE_CHECKING:
    from managed_ledger.ledger import ManagedLedger

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class CursorStore:
    def __init__(self, ml: "ManagedLedger", name: str) -> None:
        self.ml = ml
        self.name = name
        self.path = f"{ml.path}/{name}"
        self.node_version = -1
        self.ledger: LedgerHandleView | None = None  # writable handle of the current cursor ledger
        self.ledger_entries = 0
        self._ledger_created = 0.0
        self.node_ledger_id = -1  # cursors_ledger_id as last written to the node
        self.cursor_properties: dict[str, str] = {}

    @property
    def ledger_id(self) -> int:
        """The cursor ledger in use (or the one the node names)."""
        return self.ledger.ledger_id if self.ledger is not None else self.node_ledger_id

    # ------------------------------------------------------------------ create / recover
    async def create(self, initial: PositionInfo) -> bool:
        """Write a new cursor's node; False if it exists already (a previous owner's)."""
        info = CursorInfo(-1, initial, now_ms())
        try:
            stat = await self.ml.store.put(self.path, encode_cursor_info(info), -1)
        except AlreadyExistsError:
            return False
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.path}: {e}") from e
        self.node_version = stat.version
        return True

    async def recover(self) -> PositionInfo | None:
        """What was persisted: the cursor ledger's last record, or the node's position when
        the cursor ledger id is -1 or the ledger is unreadable. Claims the node."""
        ml = self.ml
        try:
            data, stat = await ml.store.get(self.path)
        except NotFoundError:
            raise CursorNotFoundError(self.path) from None
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.path}: {e}") from e
        self.node_version = stat.version
        info = decode_cursor_info(data)
        self.node_ledger_id = info.cursors_ledger_id
        self.cursor_properties = dict(info.cursor_properties)
        pos: PositionInfo | None = info.position
        if info.cursors_ledger_id != -1:
            recovered = await self._read_cursor_ledger(info.cursors_ledger_id)
            if recovered is not None:
                pos = recovered
            else:
                log.warning("%s: cursor ledger %d unreadable; rolling back to the node's position", self.path, info.cursors_ledger_id)
        # Claim the node (same content, new version): a previous owner that has not noticed
        # the takeover yet now loses its next CAS on it instead of fencing us later.
        claimed = CursorInfo(info.cursors_ledger_id, info.position, now_ms(), self.cursor_properties)
        try:
            stat = await ml.store.put(self.path, encode_cursor_info(claimed), self.node_version)
        except BadVersionError as e:
            ml.set_fenced(f"cursor {self.name} changed during recovery")
            raise ManagedLedgerFencedError(f"{self.path}: modified by another owner") from e
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.path}: {e}") from e
        self.node_version = stat.version
        return pos

    async def _read_cursor_ledger(self, ledger_id: int) -> PositionInfo | None:
        ml = self.ml
        try:
            lh = await ml.bk.open_ledger(ledger_id, ml.config.password, recovery=True)
            try:
                lac = lh.last_add_confirmed
                if lac < 0:
                    return None
                entries = await lh.read(lac, lac)
                return decode_position_info(bytes(entries[0].data))
            finally:
                await close_quietly(lh, log, self.path)
        except (BKNoSuchLedgerError, BKNoSuchEntryError, BKDigestMismatchError, FormatError) as e:
            log.warning("%s: cursor ledger %d: %s", self.path, ledger_id, e)
            return None
        except BKError as e:
            raise ManagedLedgerError(f"{self.path}: cursor recovery failed: {e}") from e

    # ------------------------------------------------------------------ writes
    def _ledger_full(self) -> bool:
        cfg = self.ml.config
        return (
            self.ledger_entries >= cfg.metadata_max_entries_per_ledger
            or trio.current_time() - self._ledger_created >= cfg.ledger_rollover_timeout_s
        )

    async def write_position(self, info: PositionInfo, node_fallback: Callable[[], PositionInfo]) -> None:
        """Append ``info`` to the cursor ledger (a new one when full or missing); when the node
        is rewritten to point at a new ledger it gets ``node_fallback()`` (at most the ranges a
        node may hold), built only then."""
        data = encode_position_info(info)
        if self.ledger is not None and not self._ledger_full():
            try:
                await self.ledger.add_entry(data)
                self.ledger_entries += 1
                return
            except BKError as e:
                log.warning("%s: cursor ledger %d write failed (%s); falling back to the metadata store",
                            self.path, self.ledger.ledger_id, e)
                self.ledger = None
        else:
            try:
                await self._switch_ledger(data, node_fallback)
                return
            except BKError as e:
                log.warning("%s: cannot create a cursor ledger (%s); using the metadata store", self.path, e)
        await self.write_node(-1, info)

    async def _switch_ledger(self, data: bytes, node_fallback: Callable[[], PositionInfo]) -> None:
        """New cursor ledger -> write the position -> CAS the node to it -> drop the old."""
        ml = self.ml
        cfg = ml.config
        lh = await ml.bk.create_ledger(
            cfg.metadata_ensemble_size,
            cfg.metadata_write_quorum,
            cfg.metadata_ack_quorum,
            password=cfg.password,
            custom_metadata={"application": b"pulsar", "component": b"managed-ledger-cursor", "pulsar/cursor": self.path.encode()},
        )
        try:
            await lh.add_entry(data)
            old_ids = {self.node_ledger_id}
            if self.ledger is not None:
                old_ids.add(self.ledger.ledger_id)
            await self.write_node(lh.ledger_id, node_fallback())
        except BaseException:
            with trio.CancelScope(shield=True):
                await ml.delete_ledger_quietly(lh.ledger_id)
            raise
        old = self.ledger
        self.ledger = lh
        self.ledger_entries = 1
        self._ledger_created = trio.current_time()
        if old is not None:
            await close_quietly(old, log, self.path)
        for ledger_id in old_ids - {-1, lh.ledger_id}:
            await ml.delete_ledger_quietly(ledger_id)

    async def write_node(self, cursors_ledger_id: int, info: PositionInfo) -> None:
        ml = self.ml
        node = CursorInfo(cursors_ledger_id, info, now_ms(), self.cursor_properties)
        try:
            stat = await ml.store.put(self.path, encode_cursor_info(node), self.node_version)
        except BadVersionError as e:
            ml.set_fenced(f"cursor {self.name} node version conflict")
            raise ManagedLedgerFencedError(f"{self.path}: modified by another owner") from e
        except NotFoundError as e:
            raise CursorNotFoundError(self.path) from e
        except MetadataError as e:
            raise CursorPersistError(f"{self.path}: {e}") from e
        self.node_version = stat.version
        self.node_ledger_id = cursors_ledger_id

    async def move_to_node(self, info: PositionInfo) -> None:
        """Small state on close: the node holds it and the cursor ledger goes away."""
        await self.write_node(-1, info)
        old, self.ledger = self.ledger, None
        if old is not None:
            await close_quietly(old, log, self.path)
            await self.ml.delete_ledger_quietly(old.ledger_id)

    async def close_ledger(self) -> None:
        old, self.ledger = self.ledger, None
        if old is not None:
            await close_quietly(old, log, self.path)

    async def delete(self, expected_version: int | None) -> None:
        """Remove the node and every cursor ledger it or this store knew."""
        ledgers = {self.node_ledger_id}
        if self.ledger is not None:
            ledgers.add(self.ledger.ledger_id)
        await self.close_ledger()
        try:
            await self.ml.store.delete(self.path, expected_version)
        except NotFoundError:
            pass
        except BadVersionError as e:
            self.ml.set_fenced(f"cursor {self.name} changed by another owner")
            raise ManagedLedgerFencedError(f"{self.path}: modified by another owner") from e
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.path}: {e}") from e
        for ledger_id in ledgers - {-1}:
            await self.ml.delete_ledger_quietly(ledger_id)

