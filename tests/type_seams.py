"""Checked by the type checker only (tests/test_type_seams.py runs mypy on it), never imported.

Each function assigns a real implementation and its test stand-in to the Protocol of the seam
they both serve: a fake that drifts from the real thing (a renamed method, a changed
signature) fails here, in CI, instead of silently testing something else.
"""

from bookie.client.bookkeeper import BookKeeper
from clients.connection_handler import Reconnectable
from clients.consumer import Consumer
from clients.producer import Producer
from bookie.client.ledger_handle import LedgerHandle
from managed_ledger.cursor import ManagedCursor
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.interfaces import ManagedCursorView, ManagedLedgerFactoryView, ManagedLedgerView
from managed_ledger.ledger import ManagedLedger
from managed_ledger.ledger_client import LedgerClient, LedgerHandleView
from tests.broker.memory_ml import MemoryCursor, MemoryManagedLedger, MemoryManagedLedgerFactory
from tests.managed_ledger.fake_bk import FakeBookKeeper, FakeLedgerHandle


def ledger_client_seam(real: BookKeeper, fake: FakeBookKeeper) -> list[LedgerClient]:
    return [real, fake]


def ledger_handle_seam(real: LedgerHandle, fake: FakeLedgerHandle) -> list[LedgerHandleView]:
    return [real, fake]


def managed_ledger_seam(real: ManagedLedger, fake: MemoryManagedLedger) -> list[ManagedLedgerView]:
    return [real, fake]


def managed_cursor_seam(real: ManagedCursor, fake: MemoryCursor) -> list[ManagedCursorView]:
    return [real, fake]


def managed_ledger_factory_seam(real: ManagedLedgerFactory, fake: MemoryManagedLedgerFactory) -> list[ManagedLedgerFactoryView]:
    return [real, fake]


def reconnectable_seam(producer: Producer, consumer: Consumer) -> list[Reconnectable]:
    return [producer, consumer]
