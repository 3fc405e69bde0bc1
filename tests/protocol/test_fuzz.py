"""Hypothesis fuzzers: the codec never raises anything but its own exceptions on any input."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.protocol import batch as b
from clients.protocol import commands as c
from clients.protocol import compression as z
from clients.protocol import frames as f
from clients.protocol.errors import ProtocolError

_VALID = [
    f.encode_command(c.flow(1, 100)),
    f.encode_command(c.subscribe("t", "s", 0, 1, 2, start_message_id=c.message_id(-1, -1))),
    f.encode_payload_command(
        c.send(1, 2, 2),
        c.message_metadata("p", 2, 3, num_messages_in_batch=2),
        b.serialize_batch([(c.single_message_metadata(0), b"a"), (c.single_message_metadata(0), b"bc")]),
    ),
    f.message_frame(c.message(1, 2, 3), f.encode_entry(c.message_metadata("p", 1, 1), b"data")),
]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _drive(stream: bytes, cuts: list[int]) -> None:
    dec = f.FrameDecoder(max_frame_size=64 * 1024)
    pos = 0
    try:
        for cut in sorted(set(cuts)) + [len(stream)]:
            for frame in dec.feed(stream[pos:cut]):
                if frame.metadata_and_payload is not None:
                    frame.payload()
                    meta = frame.metadata()
                    frame.stored_entry()
                    if meta.HasField("num_messages_in_batch"):
                        b.parse_batch(frame.payload(), meta.num_messages_in_batch)
            pos = max(pos, cut)
    except ProtocolError:
        pass


@FUZZ
@given(st.binary(max_size=512), st.lists(st.integers(0, 512), max_size=8))
def test_random_bytes(data: bytes, cuts: list[int]) -> None:
    _drive(data, cuts)


@FUZZ
@given(
    st.sampled_from(_VALID),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.lists(st.integers(0, 400), max_size=4),
)
def test_mutated_valid_frames(frame: bytes, flips: list[tuple[int, int]], cuts: list[int]) -> None:
    buf = bytearray(frame)
    for pos, value in flips:
        buf[pos % len(buf)] = value
    _drive(bytes(buf), cuts)


@FUZZ
@given(st.sampled_from(_VALID), st.integers(0, 200))
def test_truncated_then_resized(frame: bytes, cut: int) -> None:
    # Rewrite the total size to claim fewer bytes than the content: must not crash either.
    cut = cut % len(frame)
    body = frame[4 : 4 + cut]
    _drive(struct.pack(">I", len(body)) + body, [])


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 20))
def test_parse_entry_and_batch(data: bytes, count: int) -> None:
    try:
        f.parse_entry(data, verify_checksum=True)
    except ProtocolError:
        pass
    try:
        b.parse_batch(data, count)
    except ProtocolError:
        pass


@FUZZ
@given(st.sampled_from([0, 1, 2, 3, 4]), st.binary(max_size=200), st.integers(0, 5000))
def test_decompress_garbage(codec: int, data: bytes, size: int) -> None:
    try:
        z.decompress(codec, data, size)
    except ProtocolError:
        pass
