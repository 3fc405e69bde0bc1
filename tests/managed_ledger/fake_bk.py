"""An in-memory fake of the ledger-client API (`bookie.client.BookKeeper`) for unit tests.

Same surface and the same semantics the managed ledger relies on: entry ids are assigned
in call order, adds complete in order after a (configurable) delay, a recovery open fences
the ledger so its writer's next add fails with BKLedgerFencedError, a closed/recovered
ledger's length is fixed, and a plain open of a ledger nobody closed sees a LAC one behind
its last entry (``read_unconfirmed`` reads past it). Several `FakeBookKeeper` clients share one `FakeBookies`, which
plays the bookies + ledger metadata, and tests can inject add/create failures there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import trio

from bookie.client.errors import (
    BKAddError,
    BKError,
    BKLedgerClosedError,
    BKLedgerFencedError,
    BKNoSuchEntryError,
    BKNoSuchLedgerError,
    BKNotEnoughBookiesError,
)


@dataclass
class LedgerEntry:
    ledger_id: int
    entry_id: int
    data: bytes


@dataclass
class _Ledger:
    ledger_id: int
    entries: list[bytes] = field(default_factory=list)
    fenced: bool = False
    closed: bool = False
    custom_metadata: dict = field(default_factory=dict)


class FakeBookies:
    def __init__(self, add_delay: float = 0.0) -> None:
        self.ledgers: dict[int, _Ledger] = {}
        self.next_id = 1
        self.add_delay = add_delay
        self.fail_creates = 0  # the next n create_ledger calls fail
        self.create_delay = 0.0  # seconds each create_ledger takes
        self.create_gate: trio.Event | None = None  # when set: create_ledger waits for it
        # When set: adds wait for it; with fail_at_gate they then all fail at once, like the real
        # client's handle failing every pending add when an ensemble change finds no bookie.
        self.add_gate: trio.Event | None = None
        self.fail_at_gate = False
        self.fail_adds = 0  # the next n adds fail (not fencing)
        self.close_gate: trio.Event | None = None  # when set: a writer's close waits for it
        self.deleted: list[int] = []

    def client(self) -> "FakeBookKeeper":
        return FakeBookKeeper(self)


class FakeLedgerHandle:
    def __init__(self, bookies: FakeBookies, ledger: _Ledger, writable: bool) -> None:
        self._bookies = bookies
        self._ledger = ledger
        self._writable = writable
        self.ledger_id = ledger.ledger_id
        self._next = len(ledger.entries)
        self._lac = len(ledger.entries) - 1
        self._closed = not writable
        # A reader of a ledger its writer has not closed learns the LAC from the bookies:
        # the one piggybacked on the last stored entry, i.e. one behind.
        self._frozen_lac = None if writable or ledger.closed else len(ledger.entries) - 2
        self._last_acked_turn = -1
        self._turn_changed = trio.Condition()

    @property
    def last_add_confirmed(self) -> int:
        if self._writable:
            return self._lac
        return len(self._ledger.entries) - 1 if self._frozen_lac is None else self._frozen_lac

    @property
    def length(self) -> int:
        return sum(len(e) for e in self._ledger.entries[: self.last_add_confirmed + 1])

    @property
    def metadata(self) -> dict:
        return self._ledger.custom_metadata

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _take_id(self) -> tuple[int, bool]:
        # id assigned synchronously, like the real client: call order = entry order
        if self._closed:
            raise BKLedgerClosedError(str(self.ledger_id))
        entry_id = self._next
        self._next += 1
        fail = False
        if self._bookies.fail_adds > 0:
            self._bookies.fail_adds -= 1
            fail = True
        return entry_id, fail

    async def add_entry(self, data: bytes) -> int:
        entry_id, fail = self._take_id()
        return await self._complete(entry_id, fail, data)

    def async_add_entry(self, data: bytes, callback: Callable[[int, BKError | None], None]) -> None:
        entry_id, fail = self._take_id()

        async def complete() -> None:
            try:
                eid = await self._complete(entry_id, fail, data)
            except BKError as e:
                callback(-1, e)
            else:
                callback(eid, None)

        trio.lowlevel.spawn_system_task(complete)

    async def _complete(self, entry_id: int, fail: bool, data: bytes) -> int:
        # Like the real client, an add once pushed completes even if its caller is cancelled.
        with trio.CancelScope(shield=True):
            if self._bookies.add_delay:
                await trio.sleep(self._bookies.add_delay)
            else:
                await trio.lowlevel.checkpoint()
            gate = self._bookies.add_gate
            if gate is not None and not gate.is_set():
                await gate.wait()
                if self._bookies.fail_at_gate:
                    self._closed = True
                    self._last_acked_turn = max(self._last_acked_turn, entry_id)  # later ids go on
                    raise BKAddError(f"injected failure of the adds in flight on {self.ledger_id}")
            async with self._turn_changed:  # complete in order
                while self._last_acked_turn != entry_id - 1:
                    await self._turn_changed.wait()
                try:
                    if self._ledger.fenced:
                        raise BKLedgerFencedError(str(self.ledger_id))
                    if fail:
                        self._closed = True
                        raise BKAddError(f"injected add failure on {self.ledger_id}:{entry_id}")
                    if self._closed and self._lac < entry_id - 1:
                        raise BKLedgerClosedError(str(self.ledger_id))
                    assert len(self._ledger.entries) == entry_id
                    self._ledger.entries.append(bytes(data))
                    self._lac = entry_id
                    return entry_id
                finally:
                    self._last_acked_turn = entry_id
                    self._turn_changed.notify_all()

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        await trio.lowlevel.checkpoint()
        if self._ledger.ledger_id not in self._bookies.ledgers:
            raise BKNoSuchLedgerError(str(self.ledger_id))
        if first < 0 or last > self.last_add_confirmed or first > last:
            raise BKNoSuchEntryError(f"{self.ledger_id}:{first}..{last}")
        return [LedgerEntry(self.ledger_id, i, self._ledger.entries[i]) for i in range(first, last + 1)]

    async def read_unconfirmed(self, first: int, last: int) -> list[LedgerEntry]:
        """No LAC bound: whatever the bookies stored."""
        await trio.lowlevel.checkpoint()
        if self._ledger.ledger_id not in self._bookies.ledgers:
            raise BKNoSuchLedgerError(str(self.ledger_id))
        if first < 0 or last >= len(self._ledger.entries) or first > last:
            raise BKNoSuchEntryError(f"{self.ledger_id}:{first}..{last}")
        return [LedgerEntry(self.ledger_id, i, self._ledger.entries[i]) for i in range(first, last + 1)]

    async def read_payloads(self, first: int, last: int, unconfirmed: bool = False) -> list[bytes]:
        entries = await (self.read_unconfirmed(first, last) if unconfirmed else self.read(first, last))
        return [e.data for e in entries]

    async def read_last_add_confirmed(self) -> int:
        await trio.lowlevel.checkpoint()
        return len(self._ledger.entries) - 1

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._writable and self._bookies.close_gate is not None:
            await self._bookies.close_gate.wait()  # a slow metadata store (the CLOSED CAS)
        self._closed = True
        if self._writable:
            self._ledger.closed = True


class FakeBookKeeper:
    def __init__(self, bookies: FakeBookies) -> None:
        self.bookies = bookies
        self.closed = False

    async def __aenter__(self) -> "FakeBookKeeper":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed = True

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, password: bytes = b"", custom_metadata=None
    ) -> FakeLedgerHandle:
        await trio.sleep(self.bookies.create_delay)
        if self.bookies.create_gate is not None:
            await self.bookies.create_gate.wait()
        if self.bookies.fail_creates > 0:
            self.bookies.fail_creates -= 1
            raise BKNotEnoughBookiesError("injected create failure")
        ledger = _Ledger(self.bookies.next_id, custom_metadata=dict(custom_metadata or {}))
        self.bookies.next_id += 1
        self.bookies.ledgers[ledger.ledger_id] = ledger
        return FakeLedgerHandle(self.bookies, ledger, writable=True)

    async def open_ledger(self, ledger_id: int, password: bytes = b"", recovery: bool = True) -> FakeLedgerHandle:
        await trio.lowlevel.checkpoint()
        ledger = self.bookies.ledgers.get(ledger_id)
        if ledger is None:
            raise BKNoSuchLedgerError(str(ledger_id))
        if recovery:
            ledger.fenced = True
            ledger.closed = True
        return FakeLedgerHandle(self.bookies, ledger, writable=False)

    async def delete_ledger(self, ledger_id: int) -> None:
        await trio.lowlevel.checkpoint()
        if self.bookies.ledgers.pop(ledger_id, None) is None:
            raise BKNoSuchLedgerError(str(ledger_id))
        self.bookies.deleted.append(ledger_id)
