"""Ledger metadata nodes in the metadata store (BookKeeper's ``LedgerManager``).

Creates, reads, compare-and-sets and removes the msgpack value at a ledger's path
(``metadata.ledger_ids.ledger_path``: hierarchical 2/4/4 layout) and translates the store's
errors into the ledger client's. The CAS loop used by every metadata change lives here too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Callable

from bookie.client.errors import BKError, BKMetadataVersionError, BKNoSuchLedgerError
from bookie.client.ledger_metadata import LedgerMetadata, MetadataFormatError, decode_metadata, encode_metadata
from metadata.errors import AlreadyExistsError, BadVersionError, MetadataError, NotFoundError
from metadata.ledger_ids import allocate_ledger_id, iter_ledger_ids, ledger_path
from metadata.store import MetadataStore

__all__ = ["LedgerManager", "Versioned"]

Versioned = tuple[LedgerMetadata, int]

# A transform returns the new value, or None when the stored value already is what we want.
Transform = Callable[[LedgerMetadata], "LedgerMetadata | None"]


class LedgerManager:
    def __init__(self, store: MetadataStore, max_retries: int = 10) -> None:
        self.store = store
        self.max_retries = max_retries

    async def create(self, md: LedgerMetadata) -> tuple[int, int]:
        """Allocate an id and write the first version; returns (ledger id, node version)."""
        for _ in range(self.max_retries):
            ledger_id = await allocate_ledger_id(self.store)
            try:
                stat = await self.store.put(ledger_path(ledger_id), encode_metadata(md), -1, make_parents=True)
            except AlreadyExistsError:
                continue  # an id handed out twice (e.g. a reset allocator): take the next one
            except MetadataError as exc:
                raise BKError(f"cannot create ledger metadata: {exc}") from exc
            return ledger_id, stat.version
        raise BKError("could not allocate a free ledger id")

    async def read(self, ledger_id: int) -> Versioned:
        try:
            data, stat = await self.store.get(ledger_path(ledger_id))
        except NotFoundError:
            raise BKNoSuchLedgerError(f"ledger {ledger_id} does not exist") from None
        except MetadataError as exc:
            raise BKError(f"cannot read metadata of ledger {ledger_id}: {exc}") from exc
        try:
            return decode_metadata(data), stat.version
        except MetadataFormatError as exc:
            raise BKError(f"ledger {ledger_id}: {exc}") from exc

    async def update(self, ledger_id: int, current: Versioned, transform: Transform) -> Versioned:
        """Compare-and-set ``transform(md)``; on a lost race, re-read and transform again.

        ``transform`` sees the freshest value and raises to refuse (e.g. the ledger got fenced).
        """
        md, version = current
        for _ in range(self.max_retries):
            new = transform(md)
            if new is None:
                return md, version
            try:
                stat = await self.store.put(ledger_path(ledger_id), encode_metadata(new), version)
                return new, stat.version
            except BadVersionError:
                md, version = await self.read(ledger_id)
            except NotFoundError:
                raise BKNoSuchLedgerError(f"ledger {ledger_id} was deleted") from None
            except MetadataError as exc:
                raise BKError(f"cannot update metadata of ledger {ledger_id}: {exc}") from exc
        raise BKMetadataVersionError(f"ledger {ledger_id}: metadata kept changing under us")

    async def iter_metadata(self, on_error: Callable[[int, BKError], None] | None = None
                            ) -> AsyncIterator[tuple[int, LedgerMetadata]]:
        """Every ledger's (id, metadata), ascending; ledgers deleted during the walk are skipped,
        and so are unreadable ones (reported to ``on_error``)."""
        async for ledger_id in iter_ledger_ids(self.store):
            try:
                md = (await self.read(ledger_id))[0]
            except BKNoSuchLedgerError:
                continue
            except BKError as exc:
                if on_error is not None:
                    on_error(ledger_id, exc)
                continue
            yield ledger_id, md

    async def remove(self, ledger_id: int) -> None:
        try:
            await self.store.delete(ledger_path(ledger_id))
        except NotFoundError:
            raise BKNoSuchLedgerError(f"ledger {ledger_id} does not exist") from None
        except MetadataError as exc:
            raise BKError(f"cannot delete ledger {ledger_id}: {exc}") from exc
