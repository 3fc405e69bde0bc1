"""Wire codec and entry-format tests: round trips, framing, bounds, and hypothesis fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie import entry_format, protocol
from bookie.errors import BookieError, DigestMismatchError, FormatError
from bookie.protocol import (
    Flag,
    FrameDecoder,
    FrameTooLargeError,
    Op,
    ProtocolError,
    Request,
    Response,
    Status,
)


def _frames(data: bytes) -> list[bytes]:
    return FrameDecoder().feed(data)


def test_request_round_trip_all_fields() -> None:
    req = Request(
        Op.READ, 7, ledger_id=12, entry_id=-1, flags=Flag.FENCE | Flag.PIGGYBACK, master_key=b"k" * 20,
        body=b"xyz", previous_lac=5, timeout_ms=100, last_entry_id=9, max_entries=3, max_bytes=1000,
    )
    [frame] = _frames(protocol.encode_request(req))
    assert protocol.decode_request(frame) == req


def test_response_round_trip_with_entries_and_body() -> None:
    resp = Response(Op.RANGE_READ, 1, Status.OK, ledger_id=3, entry_id=4, body=b"head",
                    entries=[b"a", b"", b"ccc"], lac=2, last_entry_id=6, free_disk=10, total_disk=20)
    [frame] = _frames(protocol.encode_response(resp))
    out = protocol.decode_response(frame)
    assert out == resp
    assert isinstance(out.status, Status) and isinstance(out.op, Op)
    assert protocol.decode_add_ack(frame) is None  # only an add reply is read without a Response


def test_decoder_handles_split_and_coalesced_frames() -> None:
    frames = [protocol.encode_request(Request(Op.ADD, i, 1, i, body=bytes([i]) * i)) for i in range(50)]
    stream = b"".join(frames)
    dec = FrameDecoder()
    got: list[bytes] = []
    for i in range(0, len(stream), 7):
        got += dec.feed(stream[i : i + 7])
    assert [protocol.decode_request(f).entry_id for f in got] == list(range(50))
    assert dec.buffered == 0


def _range_replies(count: int, entry_size: int) -> list[Response]:
    return [Response(Op.RANGE_READ, r, Status.OK, ledger_id=3, entry_id=10 * r,
                     entries=[bytes([r * 10 + i]) * (entry_size + i) for i in range(10)], last_entry_id=10 * r + 9)
            for r in range(count)]


def test_large_frames_fed_or_received_into_their_own_buffer() -> None:
    """A decoder with ``large_from`` gives the same frames whether fed piecewise or filled
    through pending_large (as the ledger client's reader does): large ones as bytearrays whose
    range-read entries decode as views of them; small frames between them as before."""
    replies = _range_replies(4, 3000)
    small = protocol.encode_response(Response(Op.ADD, 99, Status.OK, ledger_id=3, entry_id=1))
    stream = b"".join(x for r in replies for x in (protocol.encode_response(r), small))
    for chunk, into in ((1000, False), (7, False), (1000, True), (25_000, True)):
        dec = FrameDecoder(large_from=10_000)
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            rest = dec.pending_large() if into else None
            if rest is not None:
                n = min(len(rest), chunk, len(stream) - pos)
                rest[:n] = stream[pos:pos + n]
                rest.release()
                pos += n
                done = dec.large_received(n)
                got += [done] if done is not None else []  # type: ignore[list-item]
            else:
                got += dec.feed(stream[pos:pos + chunk])
                pos += chunk
        assert dec.buffered == 0
        out = [protocol.decode_response(f) for f in got]
        assert [type(f) for f in got] == [bytearray, bytes] * 4, (chunk, into)
        assert out == [x for r in replies for x in (r, protocol.decode_response(small[4:]))]
        assert all(type(e) is memoryview for r in out[::2] for e in r.entries)


def test_large_frame_buffers_are_reused_only_once_nothing_views_them() -> None:
    """A pooled buffer is refilled only when no entry view of its last frame is alive: a held
    view keeps its bytes while later replies arrive."""
    replies = _range_replies(6, 20_000)
    dec = FrameDecoder(large_from=10_000)

    def received(r: Response) -> Response:
        frame = protocol.encode_response(r)
        assert dec.feed(frame[:5000]) == []  # the rest goes into the frame's own buffer
        [got] = dec.feed(frame[5000:])
        assert type(got) is bytearray
        return protocol.decode_response(got)

    held = received(replies[0]).entries
    buffers = set()
    for r in replies[1:]:
        out = received(r)
        assert out == r
        buffers.add(id(out.entries[0].obj))
        del out  # its buffer may now serve the next frame
    assert len(buffers) == 1  # one buffer served them all
    assert held == replies[0].entries


def test_max_frame_size_enforced() -> None:
    dec = FrameDecoder(max_frame_size=1024)
    big = protocol.encode_request(Request(Op.ADD, 1, body=b"x" * 2000))
    with pytest.raises(FrameTooLargeError):
        dec.feed(big[:8])  # the length prefix alone is enough to refuse
    assert issubclass(FrameTooLargeError, ProtocolError)


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00\x00", struct.pack(">I", 100) + b"x", struct.pack(">I", 1) + b"\xc1",
     struct.pack(">I", 1) + b"\x01", struct.pack(">I", 2) + b"\x92\x01"],
)
def test_garbage_raises_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        protocol.decode_request(frame)
    with pytest.raises(ProtocolError):
        protocol.decode_response(frame)


def test_bad_field_types_rejected() -> None:
    good = protocol.encode_request(Request(Op.ADD, 1))[4:]
    hdr = protocol._split(good)[0]
    for i, bad in [(0, 99), (1, -1), (5, "str"), (4, 1 << 10)]:
        h = list(hdr)
        h[i] = bad
        frame = protocol.encode_frame(h)[4:]
        with pytest.raises(ProtocolError):
            protocol.decode_request(frame)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_decoders_only_raise_protocol_errors(data: bytes) -> None:
    for decode in (protocol.decode_request, protocol.decode_response):
        try:
            decode(data)
        except ProtocolError:
            pass
    try:
        FrameDecoder(max_frame_size=200).feed(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(list(Op)), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
    st.integers(-(2**63), 2**63 - 1), st.binary(max_size=64), st.lists(st.binary(max_size=40), max_size=5),
)
def test_fuzz_round_trip(op: Op, rid: int, lid: int, eid: int, body: bytes, entries: list[bytes]) -> None:
    req = Request(op, rid, lid, eid, body=body)
    assert protocol.decode_request(_frames(protocol.encode_request(req))[0]) == req
    resp = Response(op, rid, Status.NO_ENTRY, lid, eid, body=body, entries=entries)
    assert protocol.decode_response(_frames(protocol.encode_response(resp))[0]) == resp


def test_entry_pack_verify_round_trip() -> None:
    data = entry_format.pack_entry(5, 7, 6, 1234, b"payload")
    hdr = entry_format.verify(data)
    assert (hdr.ledger_id, hdr.entry_id, hdr.lac, hdr.length) == (5, 7, 6, 1234)
    assert entry_format.payload(data) == b"payload"
    assert entry_format.unpack_header(data) == hdr


def test_entry_bit_flip_detected_everywhere() -> None:
    data = bytearray(entry_format.pack_entry(1, 2, 1, 10, b"0123456789"))
    for pos in range(len(data)):
        flipped = bytearray(data)
        flipped[pos] ^= 0x10
        with pytest.raises(DigestMismatchError):
            entry_format.verify(bytes(flipped))


def test_entry_short_raises_format_error() -> None:
    with pytest.raises(FormatError):
        entry_format.unpack_header(b"\x00" * 10)
    assert issubclass(FormatError, BookieError)


def test_entry_crc_matches_layout() -> None:
    from crc32c import crc32c

    data = entry_format.pack_entry(1, 0, -1, 3, b"abc")
    meta = struct.pack(">QqqQ", 1, 0, -1, 3)
    assert data[:32] == meta
    assert int.from_bytes(data[32:36], "big") == crc32c(meta + b"abc")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1), st.sampled_from(list(Status)), st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1))
def test_fuzz_add_reply_round_trip(rid: int, status: Status, lid: int, eid: int) -> None:
    """The bookie's hand-packed ADD reply is a frame any decoder reads as the full Response."""
    frame = protocol.encode_add_reply(rid, int(status), lid, eid)
    assert len(_frames(frame)) == 1
    assert protocol.decode_response(_frames(frame)[0]) == Response(Op.ADD, rid, status, lid, eid)
    assert protocol.decode_add_ack(_frames(frame)[0]) == (rid, int(status), lid, eid)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1),
       st.integers(0, 2**64 - 1), st.binary(max_size=40))
def test_fuzz_entry_ids_and_lac_round_trip(lid: int, eid: int, lac: int, length: int, payload: bytes) -> None:
    data = entry_format.pack_entry(lid, eid, lac, length, payload)
    assert entry_format.unpack_ids(data) == (lid, eid, lac)
    assert entry_format.entry_lac(data) == lac == entry_format.unpack_header(data).lac


def test_add_reply_fast_path_agrees_with_msgpack_decoding_on_every_byte_change() -> None:
    """decode_response reads an add reply with one struct call when the frame has its exact
    size and constant bytes; any frame of that size it gets is decoded as msgpack would (the
    same Response, or the same ProtocolError)."""
    frame = _frames(protocol.encode_add_reply(2**40 + 3, int(Status.FENCED), 77, 2**33))[0]
    candidates = [frame]
    for i in range(len(frame)):
        for value in (0x00, 0x01, 0x7F, 0x90, 0x9A, 0xC0, 0xCD, 0xCF, 0xD3, 0xFF):
            candidates.append(frame[:i] + bytes([value]) + frame[i + 1:])
    for f in candidates:
        try:
            expected: object = protocol._decode_response_msgpack(f)
        except ProtocolError as exc:
            expected = type(exc)
        try:
            got: object = protocol.decode_response(f)
        except ProtocolError as exc:
            got = type(exc)
        assert got == expected, f.hex()
        # the ledger client's status-only decoding reads the same fields, or leaves the frame
        # to decode_response
        ack = protocol.decode_add_ack(f)
        if ack is not None:
            assert isinstance(got, Response) and got.op == Op.ADD, f.hex()
            assert ack == (got.request_id, int(got.status), got.ledger_id, got.entry_id), f.hex()
