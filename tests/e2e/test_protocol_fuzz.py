"""Protocol robustness against a real standalone: garbage, truncated frames, huge sizes, bad
checksums and hostile commands get an error reply or a closed connection, and the broker keeps
serving: after every example a liveness probe (process running, a new connection gets
CONNECTED and a LOOKUP answered) must succeed against the same process.

Examples are derandomized (fixed seeds) and bounded so the module stays a few seconds in CI;
``QUIRE_FUZZ_EXAMPLES=N`` runs N random examples per test instead.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
import uuid

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import Message

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from tests.e2e.conftest import Standalone
from tests.e2e.raw_protocol import RawConnection, connect_frame, exchange, next_request_id
from tests.e2e.raw_protocol import assert_serving as probe

T = pb.BaseCommand
_LONG = int(os.environ.get("QUIRE_FUZZ_EXAMPLES", "0"))


def fuzz_settings(examples: int):  # type: ignore[no-untyped-def]
    """Bounded and derandomized by default; many random examples with QUIRE_FUZZ_EXAMPLES.
    No shrinking by default: each example talks to a live process (a failing one is reported
    as found, and shrinking it could take minutes)."""
    phases = tuple(Phase) if _LONG else (Phase.explicit, Phase.generate)
    return settings(max_examples=_LONG or examples, derandomize=not _LONG, deadline=None, phases=phases,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@fuzz_settings(60)
@given(garbage=st.binary(min_size=1, max_size=400), after_connect=st.booleans())
def test_garbage_never_crashes_the_broker(standalone: Standalone, garbage: bytes, after_connect: bool) -> None:
    exchange(standalone.port, (connect_frame() if after_connect else b"") + garbage, read_for=0.02)
    probe(standalone.port, standalone.proc)


@fuzz_settings(30)
@given(cut=st.integers(min_value=1, max_value=40), flip=st.integers(min_value=0, max_value=200))
def test_truncated_and_corrupted_commands(standalone: Standalone, cut: int, flip: int) -> None:
    frame = bytearray(frames.encode_command(C.lookup("persistent://public/default/x", 1)))
    frame[flip % len(frame)] ^= 0x5A
    exchange(standalone.port, connect_frame() + bytes(frame[:-cut]), read_for=0.02)
    probe(standalone.port, standalone.proc)


def test_huge_frame_size_closes_connection(standalone: Standalone) -> None:
    replies = exchange(standalone.port, connect_frame() + struct.pack(">I", 0x7FFFFFFF) + b"\0" * 16, read_for=2)
    # CONNECTED may or may not get out before the broker drops the connection
    assert [f.command.type for f in replies] in ([], [T.CONNECTED])
    probe(standalone.port, standalone.proc)


def test_command_before_connect_closes(standalone: Standalone) -> None:
    assert exchange(standalone.port, frames.encode_command(C.ping()), read_for=2) == []
    probe(standalone.port, standalone.proc)


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


@fuzz_settings(40)
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
    probe(standalone.port, standalone.proc)


# -- hostile commands (issue 10): each once ended or stalled the whole process ---------------

_NESTED = ["(" * n + "a" + ")" * n for n in (1, 20, 600)]
_PATTERNS = st.one_of(
    st.sampled_from(["(a+)+$", "(.*)*x", "(?=a)b", "[", "\\", "a{1001}", "((a{100}){100}){100}", ".*", ""] + _NESTED),
    st.text(max_size=60),
).flatmap(lambda p: st.sampled_from([p, "persistent://public/default/" + p]))
_TOPICS = st.one_of(
    st.sampled_from([
        "persistent://public/default/fuzz-h-partition-99999999999999999999",
        "persistent://public/default/fuzz-h-partition-2147483648",
        "persistent://public/default/fuzz-h-partition-2147483647",
        "persistent://public/default/fuzz-h-partition-01",
        "persistent://public/default/fuzz-h-partition--1",
        "persistent://public/default/" + "x" * 3000,
        "persistent://pub\u00efic/default/t", "persistent://public/default/ spaced", "//", "persistent:///",
    ]),
    st.text(max_size=40).map(lambda t: "persistent://public/default/" + t),
)
_VALID_META = C.message_metadata("fuzz-h", 0, 1).SerializeToString()
_METADATA = st.one_of(
    st.just(_VALID_META),
    st.binary(max_size=48),
    st.integers(0, len(_VALID_META) - 1).map(lambda i: _VALID_META[:i] + bytes([_VALID_META[i] ^ 0xFF]) + _VALID_META[i + 1:]),
    st.integers(-2**31, 1000).map(
        lambda n: C.message_metadata("fuzz-h", 0, 1, num_messages_in_batch=n).SerializeToString()),
)
_U64 = st.one_of(st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
_ACTIONS = st.one_of(
    st.tuples(st.just("send"), _METADATA, st.binary(max_size=32), st.booleans()),
    st.tuples(st.just("send_empty")),
    st.tuples(st.just("send_unknown_producer"), st.integers(2, 2**64 - 1)),
    st.tuples(st.just("get_topics"), _PATTERNS),
    st.tuples(st.sampled_from(["lookup", "partitioned", "producer", "subscribe"]), _TOPICS),
    st.tuples(st.just("ack"), _U64, _U64, st.booleans()),
)


def _entry(meta: bytes, payload: bytes, crc: bool) -> bytes:
    section = len(meta).to_bytes(4, "big") + meta + payload
    return ((0x0E01).to_bytes(2, "big") + frames.crc32c(section).to_bytes(4, "big") if crc else b"") + section


def _action_frame(action: tuple, seq: int) -> bytes:  # type: ignore[type-arg]
    kind, *args = action
    rid = next_request_id()
    if kind == "send":
        return frames.frame_with_entry(C.send(1, seq), _entry(args[0], args[1], args[2]))
    if kind == "send_empty":
        return frames.encode_command(C.send(1, seq))
    if kind == "send_unknown_producer":
        return frames.encode_payload_command(C.send(args[0], seq), C.message_metadata("ghost", seq, 1), b"?")
    if kind == "get_topics":
        return frames.encode_command(C.get_topics_of_namespace(rid, "public/default", pattern=args[0]))
    if kind == "lookup":
        return frames.encode_command(C.lookup(args[0], rid))
    if kind == "partitioned":
        return frames.encode_command(C.partitioned_metadata(args[0], rid))
    if kind == "producer":
        return frames.encode_command(C.producer(args[0], 100 + seq, rid))
    if kind == "subscribe":
        return frames.encode_command(C.subscribe(args[0], "fuzz-s", pb.CommandSubscribe.Shared, 100 + seq, rid))
    if kind == "ack":
        return frames.encode_command(C.ack(1, [pb.MessageIdData(ledgerId=args[0], entryId=args[1])],
                                           cumulative=args[2], request_id=rid))
    raise AssertionError(kind)


_HOSTILE_TOPIC = "persistent://public/default/fuzz-hostile"


@fuzz_settings(40)
@given(version=st.integers(-2**31, 2**31 - 1), actions=st.lists(_ACTIONS, min_size=1, max_size=5))
@example(version=-5, actions=[("send_empty",)])
@example(version=20, actions=[("get_topics", "persistent://public/default/" + _NESTED[-1])])
@example(version=20, actions=[("get_topics", "public/default/(a+)+$")])
@example(version=20, actions=[(k, "persistent://public/default/t-partition-99999999999999999999")
                              for k in ("lookup", "partitioned", "producer", "subscribe")])
@example(version=20, actions=[("send", b"\xff\xff\xff\xff", b"evil", True), ("send", b"", b"evil", True)])
@example(version=20, actions=[("send_unknown_producer", 77)])
@example(version=20, actions=[("ack", 2**63 - 1, 2**63 - 1, True), ("ack", 2**64 - 1, 0, False)])
def test_hostile_commands(standalone: Standalone, version: int, actions: list[tuple]) -> None:  # type: ignore[type-arg]
    """A producer and a consumer on one topic, then hostile commands; then a good message that
    the consumer must receive after whatever of the hostile ones was stored."""
    with RawConnection(standalone.port) as conn:
        connected = conn.handshake(protocol_version=version).protocol_version
        assert 0 <= connected <= C.PROTOCOL_VERSION and (version < 0 or connected == min(version, C.PROTOCOL_VERSION))
        conn.create_producer(_HOSTILE_TOPIC, name=f"fuzz-h-{uuid.uuid4().hex[:8]}")
        rid = next_request_id()
        conn.send(C.subscribe(_HOSTILE_TOPIC, f"fuzz-{uuid.uuid4().hex[:8]}", pb.CommandSubscribe.Exclusive, 1, rid,
                              durable=False))
        conn.wait_for(T.SUCCESS, lambda f: f.command.success.request_id == rid)
        conn.send(C.flow(1, 2**31 - 1))  # a stored batch may claim many messages
        conn.send(b"".join(_action_frame(a, i) for i, a in enumerate(actions)))
        marker = uuid.uuid4().bytes
        good = frames.encode_payload_command(C.send(1, 10_000), C.message_metadata("fuzz-h", 10_000, 1), marker)
        try:
            conn.send(good)
        except OSError:
            pass  # closed by the broker (a SEND for an unknown producer)
        if not any(a[0] == "send_unknown_producer" for a in actions):
            conn.wait_for(T.SEND_RECEIPT, lambda f: f.command.send_receipt.sequence_id == 10_000)
            conn.wait_for(T.MESSAGE, lambda f: bytes(f.payload()) == marker)
    probe(standalone.port, standalone.proc)


def test_no_unhandled_exception_was_logged(standalone: Standalone) -> None:
    """Runs last in this module: every bad input above was handled, none escaped as a traceback."""
    probe(standalone.port, standalone.proc)
    assert "Traceback" not in standalone.proc.log_text()
