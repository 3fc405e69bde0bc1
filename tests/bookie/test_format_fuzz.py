"""Fuzzing the bookie's file-format readers (fixed budgets, run in CI): whatever bytes a crash,
a torn write or a bad disk leaves, the journal and entry-log scanners return an exact prefix
of what was written and stop; header and index decoders raise only `FormatError`."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie import entry_log_format as elf
from bookie import journal_format as jf
from bookie.errors import FormatError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.tuples(st.integers(0, 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
records = st.lists(st.tuples(ids, st.binary(max_size=300)), min_size=1, max_size=12)


def _journal_image(recs: list) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    payloads = [struct.pack(">Qq", lid, eid) + body for (lid, eid), body in recs]
    return jf.encode_header(1) + b"".join(jf.encode_record(p) for p in payloads), [
        (lid, eid, p) for ((lid, eid), _), p in zip(recs, payloads)]


def _mutate(image: bytes, data: st.DataObject, floor: int) -> bytes:
    """A torn tail, a flipped byte, or garbage after the end, past `floor` (the header)."""
    kind = data.draw(st.sampled_from(["truncate", "flip", "garbage", "zeros+garbage"]))
    if kind == "truncate":
        return image[: data.draw(st.integers(floor, len(image)))]
    if kind == "flip":
        i = data.draw(st.integers(floor, len(image) - 1))
        return image[:i] + bytes([image[i] ^ data.draw(st.integers(1, 255))]) + image[i + 1:]
    tail = data.draw(st.binary(min_size=1, max_size=64))
    return image + (bytes(data.draw(st.integers(1, 100))) if kind == "zeros+garbage" else b"") + tail


@FUZZ
@given(records, st.data())
def test_journal_scan_returns_an_exact_prefix_of_what_was_written(recs: list, data: st.DataObject) -> None:
    image, written = _journal_image(recs)
    damaged = _mutate(image, data, jf.HEADER_SIZE)
    result = jf.ScanResult(0, "")
    got = [(r.ledger_id, r.entry_id, r.payload) for r in jf.scan(damaged, jf.HEADER_SIZE, result)]
    assert got == written[: len(got)]
    assert result.reason in {"eof", "zeros", "torn", "corrupt"}
    assert jf.HEADER_SIZE <= result.end_offset <= len(damaged)
    if damaged.startswith(image):
        assert got == written  # garbage after the last record hides nothing before it


@FUZZ
@given(st.binary(max_size=2048), st.integers(0, 600))
def test_journal_scan_of_garbage_never_raises(garbage: bytes, start: int) -> None:
    list(jf.scan(garbage, min(start, len(garbage))))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.binary(max_size=300)),
                min_size=1, max_size=12), st.data())
def test_entry_log_scan_returns_an_exact_prefix(recs: list, data: st.DataObject) -> None:
    header = elf.encode_header(elf.LogHeader(7))
    image = header + b"".join(elf.encode_record(lid, eid, body) for lid, eid, body in recs)
    damaged = _mutate(image, data, elf.HEADER_SIZE)
    got = [(r.ledger_id, r.entry_id, r.data) for r in elf.scan(damaged)]
    assert got == [tuple(r) for r in recs[: len(got)]]
    if damaged.startswith(image):
        assert len(got) == len(recs)


@FUZZ
@given(st.binary(max_size=1024))
def test_decoders_raise_only_format_errors(garbage: bytes) -> None:
    for decode in (jf.decode_header, elf.decode_header, elf.decode_location,
                   lambda b: elf.decode_record(b, 0), lambda b: elf.decode_ledgers_map(b, 0, 3)):
        try:
            decode(garbage)
        except FormatError:
            pass


@settings(max_examples=300, deadline=None)
@given(lid=st.integers(0, 2**63 - 1), eid=st.integers(0, 2**62), payload=st.binary(max_size=64),
       flip=st.none() | st.integers(0, 99), ask=st.sampled_from(["same", "other-entry", "other-ledger", "cut"]))
def test_is_entry_agrees_with_verify(lid: int, eid: int, payload: bytes, flip: int | None, ask: str) -> None:
    """The range reader's lean check accepts exactly what verify accepts for that id."""
    from bookie import entry_format

    data = bytearray(entry_format.pack_entry(lid, eid, eid - 1, len(payload), payload))
    if flip is not None:
        data[flip % len(data)] ^= 0x40
    if ask == "cut":
        data = data[: len(data) // 3]
    want_lid, want_eid = (lid, eid + 1) if ask == "other-entry" else (lid + 1, eid) if ask == "other-ledger" else (lid, eid)
    try:
        hdr = entry_format.verify(bytes(data))
        expected = (hdr.ledger_id, hdr.entry_id) == (want_lid, want_eid)
    except FormatError:
        expected = False
    assert entry_format.is_entry(bytes(data), want_lid, want_eid) is expected
