"""The ledger list's home in the metadata store: ``/managed-ledgers/<name>``, written by CAS.

Every change is a compare-and-set on the version this owner last read or wrote; a conflict (or
the node gone) means another owner took over, which surfaces as ``ManagedLedgerFencedError``.
"""

from __future__ import annotations

from managed_ledger.errors import ManagedLedgerFencedError, ManagedLedgerNotFoundError, MetadataUnavailableError
from managed_ledger.formats import ManagedLedgerInfo, decode_ml_info, encode_ml_info
from metadata.errors import BadVersionError, MetadataError, NotFoundError
from metadata.store import MetadataStore


class LedgerListStore:
    def __init__(self, store: MetadataStore, path: str, name: str) -> None:
        self.store = store
        self.path = path
        self.name = name
        self.version = -1

    async def load(self, create_if_missing: bool = True) -> ManagedLedgerInfo:
        """Read the list (creating an empty one if allowed) and remember its version."""
        try:
            try:
                data, stat = await self.store.get(self.path)
                info = decode_ml_info(data)
            except NotFoundError:
                if not create_if_missing:
                    raise ManagedLedgerNotFoundError(self.name) from None
                info = ManagedLedgerInfo()
                stat = await self.store.put(self.path, encode_ml_info(info), -1, make_parents=True)
        except BadVersionError as e:
            raise ManagedLedgerFencedError(f"{self.name}: concurrent open") from e
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.name}: {e}") from e
        self.version = stat.version
        return info

    async def write(self, info: ManagedLedgerInfo) -> None:
        """CAS ``info`` over the version last seen; ManagedLedgerFencedError on a conflict."""
        try:
            stat = await self.store.put(self.path, encode_ml_info(info), self.version)
        except (BadVersionError, NotFoundError) as e:
            raise ManagedLedgerFencedError(f"{self.name}: ledger list version conflict, another owner took over") from e
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.name}: {e}") from e
        self.version = stat.version
