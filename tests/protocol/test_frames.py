"""Frame encoding/decoding: golden bytes from the reference layout, round trips, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import commands as c
from clients.protocol import frames as f
from clients.protocol import pulsar_api_pb2 as pb
from clients.protocol.errors import FrameTooLargeError, ProtocolError


def test_crc32c_is_castagnoli() -> None:
    # The standard CRC-32C check value, and resumption over split input.
    assert f.crc32c(b"123456789") == 0xE3069283
    assert f.crc32c(b"6789", f.crc32c(b"12345")) == 0xE3069283


def test_golden_ping_frame() -> None:
    # BaseCommand{type=PING(18) -> 08 12, ping (field 18, LEN) -> 92 01 00}; cmdSize 5, total 9.
    expected = bytes.fromhex("00000009" "00000005" "0812" "920100")
    assert f.encode_command(c.ping()) == expected
    (frame,) = f.FrameDecoder().feed(expected)
    assert frame.command.type == pb.BaseCommand.PING
    assert frame.command.HasField("ping")
    assert frame.metadata_and_payload is None and frame.checksum_ok is None


def _golden_send() -> tuple[bytes, bytes, bytes, bytes]:
    cmd = bytes.fromhex("0806" "3204" "0801" "1007")  # SEND{producer_id=1, sequence_id=7}
    meta = bytes.fromhex("0a0170" "1007" "18e807")  # producer_name="p", sequence_id=7, publish_time=1000
    payload = b"hi"
    section = struct.pack(">I", len(meta)) + meta + payload
    entry = struct.pack(">HI", 0x0E01, f.crc32c(section)) + section
    frame = struct.pack(">II", 4 + len(cmd) + len(entry), len(cmd)) + cmd + entry
    return cmd, meta, entry, frame


@pytest.mark.parametrize("size", [0, 1, 1000, 128 * 1024])
def test_payload_command_is_the_command_then_the_entry(size: int) -> None:
    meta, payload = c.message_metadata("p", 7, 1000, num_messages_in_batch=3), bytes(range(256)) * (size // 256 + 1)
    for command in (c.send(1, 7), c.send_bytes(1, 7)):
        assert f.encode_payload_command(command, meta, payload[:size]) == f.frame_with_entry(
            command, f.encode_entry(meta, payload[:size]))


def test_golden_send_frame() -> None:
    _, _, entry, frame = _golden_send()
    meta = c.message_metadata("p", 7, 1000)
    assert f.encode_payload_command(c.send(1, 7), meta, b"hi") == frame
    assert f.encode_entry(meta, b"hi") == entry
    (decoded,) = f.FrameDecoder().feed(frame)
    assert decoded.checksum_ok is True
    assert decoded.command.send.producer_id == 1 and decoded.command.send.sequence_id == 7
    assert decoded.command.send.num_messages == 1
    assert bytes(decoded.payload()) == b"hi"
    assert decoded.metadata().publish_time == 1000
    assert decoded.stored_entry() == entry


def test_payload_without_checksum() -> None:
    meta = c.message_metadata("p", 1, 5)
    frame = f.encode_payload_command(c.send(3, 1), meta, b"xyz", checksum=False)
    (decoded,) = f.FrameDecoder().feed(frame)
    assert decoded.checksum_ok is None
    assert bytes(decoded.payload()) == b"xyz"
    stored = decoded.stored_entry()
    assert stored[:2] == b"\x0e\x01"
    assert f.verify_entry_checksum(stored) is True
    assert stored == f.encode_entry(meta, b"xyz")


def test_bad_crc_is_reported_not_raised() -> None:
    frame = bytearray(_golden_send()[3])
    frame[-1] ^= 0xFF  # corrupt the payload
    (decoded,) = f.FrameDecoder().feed(bytes(frame))
    assert decoded.checksum_ok is False
    assert f.verify_entry_checksum(decoded.entry) is False


def test_message_frame_reuses_stored_entry_untouched() -> None:
    _, _, entry, _ = _golden_send()
    msg = c.message(42, 5, 9, partition=2, redelivery_count=1)
    frame = f.message_frame(msg, entry)
    assert frame.endswith(entry)
    (decoded,) = f.FrameDecoder().feed(frame)
    assert decoded.checksum_ok is True
    assert bytes(decoded.entry) == entry
    m = decoded.command.message
    assert (m.consumer_id, m.message_id.ledgerId, m.message_id.entryId, m.message_id.partition) == (42, 5, 9, 2)
    assert m.redelivery_count == 1
    with pytest.raises(ProtocolError):
        f.message_frame(c.ping(), entry)


def test_parse_entry_splits_metadata_and_payload() -> None:
    meta = c.message_metadata("prod", 11, 1234, partition_key="k", num_messages_in_batch=4, deliver_at_time=99)
    entry = f.encode_entry(meta, b"payload-bytes")
    parsed = f.parse_entry(entry, verify_checksum=True)
    assert parsed.checksum_ok is True
    assert parsed.is_batch and parsed.num_messages == 4
    assert parsed.metadata.partition_key == "k" and parsed.metadata.deliver_at_time == 99
    assert bytes(parsed.payload) == b"payload-bytes"
    single = f.parse_entry(f.encode_entry(c.message_metadata("p", 1, 1), b"x"))
    assert not single.is_batch and single.num_messages == 1 and single.checksum_ok is None


def test_broker_entry_metadata_prefix_is_skipped() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=77, index=3).SerializeToString()
    entry = f.encode_entry(c.message_metadata("p", 1, 1), b"data")
    prefixed = struct.pack(">HI", 0x0E02, len(bem)) + bem + entry
    parsed = f.parse_entry(prefixed, verify_checksum=True)
    assert parsed.broker_entry_metadata.index == 3 and parsed.checksum_ok is True
    (decoded,) = f.FrameDecoder().feed(f.frame_with_entry(c.message(1, 1, 1), prefixed))
    assert decoded.broker_entry_metadata.broker_timestamp == 77
    assert bytes(decoded.entry) == entry and bytes(decoded.payload()) == b"data"


def test_decoder_handles_split_and_coalesced_frames() -> None:
    frames = [f.encode_command(c.flow(i, 1000)) for i in range(5)]
    frames.append(f.encode_payload_command(c.send(1, 2), c.message_metadata("p", 2, 3), b"z" * 1000))
    stream = b"".join(frames)
    dec = f.FrameDecoder()
    out = []
    for i in range(len(stream)):
        out += dec.feed(stream[i : i + 1])
    assert [fr.command.type for fr in out] == [pb.BaseCommand.FLOW] * 5 + [pb.BaseCommand.SEND]
    assert dec.buffered == 0
    assert len(f.FrameDecoder().feed(stream)) == 6
    partial = f.FrameDecoder()
    assert partial.feed(stream[:-1]) and partial.buffered == len(frames[-1]) - 1


@given(st.lists(st.integers(1, 3000), min_size=1, max_size=30))
def test_decoder_gives_the_same_frames_for_any_split(cuts: list[int]) -> None:
    """Reads end anywhere (inside a size field, a command, a payload, right after a frame): a
    pending frame is completed with just the bytes it lacks, the rest decoded in place."""
    frames = [f.encode_payload_command(c.send(1, i), c.message_metadata("p", i, 3), bytes([i]) * (i * 97))
              for i in range(12)] + [f.encode_command(c.flow(9, 1000))]
    stream = b"".join(frames)
    dec = f.FrameDecoder()
    out: list[f.Frame] = []
    pos = 0
    for cut in cuts * 50:
        if pos >= len(stream):
            break
        out += dec.feed(stream[pos : pos + cut])
        pos += cut
    out += dec.feed(stream[pos:])
    assert dec.buffered == 0
    assert [fr.command.SerializeToString() for fr in out] == [fr.command.SerializeToString()
                                                             for fr in f.FrameDecoder().feed(stream)]
    assert [bytes(fr.payload()) for fr in out[:-1]] == [bytes([i]) * (i * 97) for i in range(12)]
    assert all(fr.checksum_ok for fr in out[:-1])


def test_frame_too_large_is_detected_from_the_header() -> None:
    dec = f.FrameDecoder(max_frame_size=1000)
    with pytest.raises(FrameTooLargeError) as info:
        dec.feed(struct.pack(">I", 1001))
    assert info.value.size == 1001 and isinstance(info.value, ProtocolError)
    assert f.DEFAULT_MAX_FRAME_SIZE == 5 * 1024 * 1024 + 10 * 1024


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00",  # shorter than the cmdSize field
        struct.pack(">I", 50) + b"\x08\x12",  # cmdSize past the frame
        struct.pack(">I", 2) + b"\xff\xff",  # not protobuf
        struct.pack(">I", 2) + b"\x08\x46",  # unknown type 70: required `type` then missing
        struct.pack(">I", 4) + b"\x08\x0b\x5a\x00",  # FLOW without its required fields
        struct.pack(">I", 2) + b"\x08\x06" + b"\x0e\x01\x00",  # truncated checksum
        struct.pack(">I", 2) + b"\x08\x06" + b"\x0e\x01" + b"\x00" * 4 + struct.pack(">I", 99),  # meta past end
    ],
)
def test_garbage_frames_raise_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        f.FrameDecoder().feed(struct.pack(">I", len(body)) + body)


def test_bad_metadata_raises_protocol_error() -> None:
    entry = f.encode_entry(b"\x0a\x05ab", b"")  # string field length past the metadata
    with pytest.raises(ProtocolError):
        f.parse_entry(entry)
    with pytest.raises(ProtocolError):
        f.parse_entry(f.encode_entry(b"", b"x"))  # MessageMetadata missing required fields


def test_large_frame_in_small_chunks() -> None:
    payload = bytes(range(256)) * (4 * 1024 * 1024 // 256)
    frame = f.encode_payload_command(c.send(1, 1), c.message_metadata("p", 1, 1), payload)
    dec = f.FrameDecoder()
    out = []
    for i in range(0, len(frame), 4096):
        out += dec.feed(bytearray(frame[i : i + 4096]))  # mutable input is copied, never aliased
    assert len(out) == 1 and dec.buffered == 0
    assert out[0].checksum_ok is True and bytes(out[0].payload()) == payload
    # A frame followed by the first bytes of the next one keeps exactly those bytes.
    tail = f.encode_command(c.ping())
    assert len(dec.feed(frame + tail[:3])) == 1 and dec.buffered == 3
    assert [fr.command.type for fr in dec.feed(tail[3:])] == [pb.BaseCommand.PING]


def test_decoder_frames_locate_their_payload_in_the_received_bytes() -> None:
    # Whether a frame arrives whole, with others, or in pieces (joined when complete), its
    # payload is the tail of buffer[:end]: what a consumer splits in place without copying.
    payloads = [bytes([i]) * (100 + 37 * i) for i in range(5)]
    stream = b"".join(f.encode_payload_command(c.message(1, 1, i), pb.MessageMetadata(producer_name="p",
                      sequence_id=i, publish_time=1), p) for i, p in enumerate(payloads))
    for piece in (len(stream), 64, 7, 1):
        dec, got = f.FrameDecoder(), []
        for at in range(0, len(stream), piece):
            got += dec.feed(stream[at : at + piece])
        assert [bytes(fr.payload()) for fr in got] == payloads
        for fr, p in zip(got, payloads):
            assert type(fr.buffer) is bytes and fr.buffer[fr.end - len(p) : fr.end] == p


def test_large_entry_of_a_frame_joined_from_pieces_is_stored_as_a_view_not_a_copy() -> None:
    """A SEND that arrived in pieces is joined into bytes of its own: its stored entry (128 KiB
    here) is a read-only view of them, equal to the entry. A small entry, and one whose frame
    shares the received buffer with another large frame, is copied (a view would pin the other)."""
    meta = c.message_metadata("p", 1, 5)
    big = f.encode_payload_command(c.send(3, 1), meta, bytes(range(256)) * 512)
    small = f.encode_payload_command(c.send(3, 2), meta, b"xyz")
    decoder = f.FrameDecoder()
    assert decoder.feed(big[:50_000]) == []
    (joined,) = decoder.feed(big[50_000:] + small)[:1]
    stored = joined.stored_entry()
    assert isinstance(stored, memoryview) and stored.readonly
    assert stored == f.encode_entry(meta, bytes(range(256)) * 512)
    assert len(stored.obj) - len(stored) < 100  # pins only its own frame
    (first, second, tiny) = f.FrameDecoder().feed(big + big + small)
    assert type(first.stored_entry()) is bytes and first.stored_entry() == stored
    assert type(second.stored_entry()) is bytes and type(tiny.stored_entry()) is bytes
    decoder = f.FrameDecoder()
    decoder.feed(small[:10])
    (tiny_joined,) = decoder.feed(small[10:])
    assert type(tiny_joined.stored_entry()) is bytes
