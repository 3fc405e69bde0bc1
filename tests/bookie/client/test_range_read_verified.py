"""read_ops._range_read on replies of an in-process bookie (``verified``): the ids of the first
and last entries decide whether the whole reply is taken at once; a reply that does not start
or end at the ids asked for is cut to its prefix that does (unit tests, a fake client context)."""

from __future__ import annotations

import trio

from bookie import entry_format
from bookie.client.config import ClientConfig
from bookie.client.ledger_metadata import LedgerMetadata
from bookie.client.read_ops import _range_read
from bookie.protocol import Op, Response, Status

LEDGER = 9


class _Ctx:
    """What _range_read asks of the client: send one request, answered at once."""

    def __init__(self, entries: list[bytes], verified: bool = True) -> None:
        self.config = ClientConfig()
        self.entries, self.verified = entries, verified
        self.sent: list[tuple[int, int]] = []

    def quarantined(self) -> set[str]:
        return set()

    def note_bookie_failure(self, bookie: str) -> None:
        raise AssertionError("no failure expected")

    def send(self, bookie: str, req, on_reply, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
        self.sent.append((req.entry_id, req.last_entry_id))
        on_reply(Status.OK, Response(Op.RANGE_READ, req.request_id, Status.OK, req.ledger_id, req.entry_id, b"",
                                     list(self.entries), verified=self.verified))


def _entry(eid: int, ledger: int = LEDGER) -> bytes:
    return entry_format.pack_entry(ledger, eid, eid - 1, 0, b"payload-%d" % eid)


_MD = LedgerMetadata(ensemble_size=1, write_quorum_size=1, ack_quorum_size=1, ensembles=((0, ("b:1",)),))


def _read(ctx: _Ctx, first: int, last: int) -> list[bytes]:
    return trio.run(_range_read, ctx, LEDGER, _MD, first, last, b"")  # type: ignore[arg-type]


def test_verified_reply_of_the_range_asked_is_taken_whole() -> None:
    entries = [_entry(e) for e in range(5, 15)]
    assert _read(_Ctx(entries), 5, 14) == entries


def test_verified_reply_longer_than_asked_is_cut_at_last() -> None:
    entries = [_entry(e) for e in range(5, 15)]
    assert _read(_Ctx(entries), 5, 9) == entries[:5]


def test_verified_reply_that_ends_elsewhere_keeps_its_matching_prefix() -> None:
    # entry 8 is missing: the reply's last entry names 14, not the 13 its position says;
    # what precedes the gap is still the range asked for
    entries = [_entry(e) for e in range(5, 15) if e != 8]
    assert _read(_Ctx(entries), 5, 14) == entries[:3]


def test_verified_reply_of_another_ledger_or_start_is_refused() -> None:
    assert _read(_Ctx([_entry(e, ledger=LEDGER + 1) for e in range(5, 10)]), 5, 9) == []
    assert _read(_Ctx([_entry(e) for e in range(6, 11)]), 5, 9) == []


def test_unverified_reply_checks_every_digest() -> None:
    entries = [_entry(e) for e in range(5, 10)]
    bad = bytearray(entries[2])
    bad[-1] ^= 1
    entries[2] = bytes(bad)
    assert _read(_Ctx(entries, verified=False), 5, 9) == entries[:2]
