"""The in-code invariants (quire.invariants) fire where a bug would otherwise be silent, and
the fault-injection hooks the chaos harness uses (slow journal disk, torn tails) work."""

from __future__ import annotations

import collections
import time
import uuid
from pathlib import Path

import httpx
import pytest
import trio

from bookie.bookie import Bookie
from bookie.client.errors import BKLedgerFencedError
from bookie.client.ledger_handle import LedgerHandle
from quire.lazy_event import LazyEvent
from bookie.protocol import Status
from metadata import open_store
from metadata.ledger_ids import ledger_path
from quire import invariants
from quire.invariants import InvariantViolation
from tests.bookie.helpers import BookieClient, make_config
from tests.chaos.faults import tear_tail

def test_invariants_are_on_in_tests() -> None:
    assert invariants.ENABLED


class _Op:
    def __init__(self, entry_id: int) -> None:
        self.entry_id, self.ack_count, self.length, self.finished = entry_id, 2, 10, False
        self.completed = False
        self.callback = self._told  # what the handle calls once the entry is acknowledged

    def _told(self, entry_id: int, error: Exception | None) -> None:
        self.finished = True


def _handle(lac: int, ops: list[_Op], error: Exception | None = None) -> LedgerHandle:
    """The acknowledgement bookkeeping of a handle, without bookies (only _complete_in_order runs)."""
    h = LedgerHandle.__new__(LedgerHandle)
    for k, v in dict(_changing_ensemble=False, _ack_quorum=2, _pending=collections.deque(ops), _lac=lac,
                     _error=error, ledger_id=7, _in_flight=len(ops), _waiting=collections.deque(),
                     _lac_advanced=LazyEvent(), _length=0).items():
        object.__setattr__(h, k, v)
    return h


def test_handle_acknowledges_entry_ids_contiguously() -> None:
    ops = [_Op(5), _Op(6)]
    h = _handle(4, ops)
    h._complete_in_order()
    assert all(o.finished for o in ops) and h._lac == 6
    with pytest.raises(InvariantViolation, match="acknowledging entry 9 after 6"):
        _handle(6, [_Op(9)])._complete_in_order()


def test_handle_never_acknowledges_after_being_fenced() -> None:
    h = _handle(4, [_Op(5)], BKLedgerFencedError("fenced by another client"))
    with pytest.raises(InvariantViolation, match="fenced"):
        h._complete_in_order()


def test_tear_tail_writes_after_the_last_written_byte(tmp_path: Path) -> None:
    f = tmp_path / "1.txn"
    f.write_bytes(b"QJNLrecords" + bytes(100))
    assert tear_tail(f, b"\xff\xfe") == 11
    assert f.read_bytes() == b"QJNLrecords\xff\xfe" + bytes(98)


async def test_slow_journal_disk_route_needs_fault_injection_enabled(tmp_path: Path) -> None:
    for allowed in (False, True):
        store = await open_store(f"memory://inv-{uuid.uuid4().hex}")
        cfg = make_config(tmp_path / str(allowed), http_server_enabled=True, http_server_port=0,
                          metadata_service_uri="memory://inv", allow_fault_injection=allowed)
        async with trio.open_nursery() as nursery:
            b = Bookie(cfg, store)
            await b.start(nursery)
            c = await BookieClient.connect("127.0.0.1", b.port, nursery)
            await store.create(ledger_path(1), b"meta", make_parents=True)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{b.http_port}") as http:
                r = await http.put("/api/v1/bookie/fault/journal_sync_delay", json={"delayMs": 60})
                if not allowed:
                    assert r.status_code == 403 and "allow_fault_injection" in r.json()["error"]
                else:
                    assert r.json() == {"delayMs": 60}
                    assert (await http.put("/api/v1/bookie/fault/journal_sync_delay",
                                           json={"delayMs": "x"})).status_code == 400
                    t = time.monotonic()
                    assert (await c.add(1, 0, b"slow")).status == Status.OK
                    assert time.monotonic() - t >= 0.05  # the add waited for the slow "disk"
                    await http.put("/api/v1/bookie/fault/journal_sync_delay", json={"delayMs": 0})
                    assert (await http.get("/api/v1/bookie/fault/journal_sync_delay")).json() == {"delayMs": 0}
            await b.close()
            nursery.cancel_scope.cancel()
