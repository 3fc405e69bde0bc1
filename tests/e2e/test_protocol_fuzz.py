"""Protocol robustness against a real standalone: garbage, truncated frames, huge sizes and
bad checksums get an error reply or a closed connection, and the broker keeps serving."""

from __future__ import annotations

import random
import socket
import struct
import time

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import Message

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from tests.e2e.conftest import Standalone

T = pb.BaseCommand


def exchange(port: int, data: bytes, read_for: float = 0.2, until: int | None = None) -> list[frames.Frame]:
    """Send raw bytes; collect decodable replies until the broker closes or goes quiet."""
    out: list[frames.Frame] = []
    decoder = frames.FrameDecoder()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
        except OSError:
            return out
        deadline = time.monotonic() + read_for
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out.extend(decoder.feed(chunk))
            if until is not None and any(f.command.type == until for f in out):
                break
    return out


def connect_frame() -> bytes:
    return frames.encode_command(C.connect("fuzz", protocol_version=20))


def assert_serving(port: int) -> None:
    replies = exchange(port, connect_frame(), read_for=5, until=T.CONNECTED)
    assert replies and replies[0].command.type == T.CONNECTED


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=400), after_connect=st.booleans())
def test_garbage_never_crashes_the_broker(standalone: Standalone, garbage: bytes, after_connect: bool) -> None:
    exchange(standalone.port, (connect_frame() if after_connect else b"") + garbage, read_for=0.02)
    assert_serving(standalone.port)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=40), flip=st.integers(min_value=0, max_value=200))
def test_truncated_and_corrupted_commands(standalone: Standalone, cut: int, flip: int) -> None:
    frame = bytearray(frames.encode_command(C.lookup("persistent://public/default/x", 1)))
    frame[flip % len(frame)] ^= 0x5A
    exchange(standalone.port, connect_frame() + bytes(frame[:-cut]), read_for=0.02)
    assert_serving(standalone.port)


def test_huge_frame_size_closes_connection(standalone: Standalone) -> None:
    replies = exchange(standalone.port, connect_frame() + struct.pack(">I", 0x7FFFFFFF) + b"\0" * 16, read_for=2)
    # CONNECTED may or may not get out before the broker drops the connection
    assert [f.command.type for f in replies] in ([], [T.CONNECTED])
    assert_serving(standalone.port)


def test_command_before_connect_closes(standalone: Standalone) -> None:
    assert exchange(standalone.port, frames.encode_command(C.ping()), read_for=2) == []
    assert_serving(standalone.port)


def test_bad_checksum_gets_checksum_error_then_good_send_works(standalone: Standalone) -> None:
    topic = "persistent://public/default/fuzz-crc"
    md = C.message_metadata("fuzz-p", 0, int(time.time() * 1000))
    bad = bytearray(frames.encode_payload_command(C.send(1, 0), md, b"payload"))
    bad[-1] ^= 0xFF  # corrupt the payload under the CRC
    md1 = C.message_metadata("fuzz-p", 1, int(time.time() * 1000))
    good = frames.encode_payload_command(C.send(1, 1), md1, b"payload")
    data = connect_frame() + frames.encode_command(C.producer(topic, 1, 1, producer_name="fuzz-p"))
    with socket.create_connection(("127.0.0.1", standalone.port), timeout=10) as sock:
        sock.sendall(data)
        decoder = frames.FrameDecoder()
        got: list[frames.Frame] = []
        while not any(f.command.type == T.PRODUCER_SUCCESS for f in got):
            got.extend(decoder.feed(sock.recv(65536)))
        sock.sendall(bytes(bad) + good)
        while not any(f.command.type == T.SEND_RECEIPT for f in got):
            got.extend(decoder.feed(sock.recv(65536)))
    types = [f.command.type for f in got]
    assert types.index(T.SEND_ERROR) < types.index(T.SEND_RECEIPT)
    err = next(f.command.send_error for f in got if f.command.type == T.SEND_ERROR)
    assert err.error == pb.ServerError.ChecksumError and err.sequence_id == 0
    receipt = next(f.command.send_receipt for f in got if f.command.type == T.SEND_RECEIPT)
    assert receipt.sequence_id == 1 and receipt.HasField("message_id")


_STRINGS = ["persistent://public/default/fuzz-cmd", "fuzz-cmd", "", "persistent://nope/ns/t", "bad://x",
            "persistent://public/default/fuzz-cmd-partition-1", "non-persistent://public/default/q", "s", ".*", "a/b"]
_INTS = [0, 1, 2, 5, -1, 2**31 - 1, -2**31, 2**63 - 1, 2**64 - 1]


def _fill(msg: Message, rng: random.Random, depth: int = 0) -> None:
    """Random values for a random subset of ``msg``'s fields (edge-case numbers, odd names)."""
    for f in msg.DESCRIPTOR.fields:
        if not f.is_required and rng.random() < 0.3:
            continue
        if f.type == FD.TYPE_MESSAGE:
            if depth < 2:
                for _ in range(rng.randint(0, 2) if f.is_repeated else 1):
                    _fill(getattr(msg, f.name).add() if f.is_repeated else getattr(msg, f.name), rng, depth + 1)
            continue
        for _ in range(rng.randint(0, 3) if f.is_repeated else 1):
            if f.type == FD.TYPE_ENUM:
                value: object = rng.choice([v.number for v in f.enum_type.values])
            elif f.type == FD.TYPE_BOOL:
                value = rng.random() < 0.5
            elif f.type == FD.TYPE_STRING:
                value = rng.choice(_STRINGS)
            elif f.type == FD.TYPE_BYTES:
                value = rng.randbytes(rng.randint(0, 16))
            elif f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
                value = rng.random()
            else:
                value = rng.choice(_INTS)
                if f.type in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
                    value %= 2**32
                elif f.type in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
                    value %= 2**64
                elif f.type in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
                    value = max(-2**31, min(2**31 - 1, value))  # type: ignore[call-overload]
                elif value >= 2**63:  # type: ignore[operator]
                    value = 2**63 - 1
            if f.is_repeated:
                getattr(msg, f.name).append(value)
            else:
                setattr(msg, f.name, value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), count=st.integers(min_value=1, max_value=6))
def test_well_framed_random_commands(standalone: Standalone, seed: int, count: int) -> None:
    """Well-formed frames carrying commands of every type with random field values."""
    rng = random.Random(seed)
    out = [connect_frame()]
    for _ in range(count):
        t = rng.choice(list(C.FIELD_BY_TYPE))
        cmd = pb.BaseCommand(type=t)
        _fill(getattr(cmd, C.FIELD_BY_TYPE[t]), rng)
        raw = cmd.SerializePartialToString()  # required fields may be missing: that is the point
        out.append(struct.pack(">II", len(raw) + 4, len(raw)) + raw)
    exchange(standalone.port, b"".join(out), read_for=0.05)
    assert_serving(standalone.port)


def test_no_unhandled_exception_was_logged(standalone: Standalone) -> None:
    """Runs last in this module: every bad input above was handled, none escaped as a traceback."""
    assert_serving(standalone.port)
    assert "Traceback" not in standalone.proc.log_text()
