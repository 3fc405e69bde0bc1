"""broker/lone_send.py: a read holding one plain SEND frame with a checked entry decodes by hand
to exactly what the general decoder gives (fields, and the entry the broker stores), every other
shape and every entry the broker would refuse is left to the general decoder (None), and through
a broker connection such SENDs are stored and answered as before; a SEND already there after a
receipt is read without a wait (bounded), and only while such reads find one."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
from typing import Any

import pytest
import trio

from broker import connection as connection_module
from broker.lone_send import LONE_SEND_COMMAND, LONE_SEND_FRAME, decode_lone_send
from broker.producer import check_message
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from quire import socket_io
from tests.broker.conftest import start_broker
from tests.broker.test_error_boundary import TrioRawConnection

T = pb.BaseCommand

MAX = frames.DEFAULT_MAX_FRAME_SIZE


def _send_frame(send: pb.CommandSend, payload: bytes = b"payload", *, checksum: bool = True) -> bytes:
    meta = C.message_metadata("producer-1", send.sequence_id, 1_700_000_000_000)
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND, send=send)
    return frames.encode_payload_command(cmd, meta, payload, checksum=checksum)


def _assert_same_as_general(data: bytes) -> None:
    fields = decode_lone_send(data, MAX)
    (general,) = frames.FrameDecoder().feed(data)
    if general.checksum_ok is not True:  # no checksum (or a wrong one): the general path's
        assert fields is None
        return
    assert fields is not None
    check_message(general)  # what the lone path accepts, the general path accepts too
    send = general.command.send
    assert (fields.producer_id, fields.sequence_id, fields.num_messages, fields.highest_sequence_id) == (
        send.producer_id, send.sequence_id, send.num_messages, send.highest_sequence_id)
    assert fields.command() == general.command  # parsed from the same bytes, for an error's answer
    assert fields.entry == general.stored_entry()


def test_plain_sends_decode_as_the_general_decoder_does() -> None:
    rng = random.Random(17)
    for _ in range(300):
        send = pb.CommandSend(producer_id=rng.choice([0, 1, 127, 128, 2**32, 2**64 - 1]),
                              sequence_id=rng.choice([0, 5, 300, 2**35, 2**64 - 1]))
        if rng.random() < 0.5:
            send.num_messages = rng.choice([1, 2, 127, 1000, 2**31 - 1])
        if rng.random() < 0.5:
            send.highest_sequence_id = rng.choice([0, 9, 2**40])
        _assert_same_as_general(_send_frame(send, rng.randbytes(rng.choice([0, 1, 100, 5000])),
                                            checksum=rng.random() < 0.8))


def test_a_corrupted_payload_is_left_to_the_general_decoder() -> None:
    data = bytearray(_send_frame(pb.CommandSend(producer_id=1, sequence_id=2)))
    data[-1] ^= 0xFF  # the payload no longer matches its CRC32C
    assert decode_lone_send(bytes(data), MAX) is None
    (general,) = frames.FrameDecoder().feed(bytes(data))
    assert general.checksum_ok is False  # answered ChecksumError there


def test_the_shared_placeholders_stay_untouched() -> None:
    for seq in range(3):
        decode_lone_send(_send_frame(pb.CommandSend(producer_id=9, sequence_id=seq, highest_sequence_id=seq)), MAX)
    assert LONE_SEND_COMMAND == pb.BaseCommand(type=pb.BaseCommand.SEND)
    assert LONE_SEND_FRAME == frames.Frame(LONE_SEND_COMMAND)


def test_every_other_shape_is_left_to_the_general_decoder() -> None:
    plain = _send_frame(pb.CommandSend(producer_id=1, sequence_id=2))
    others = [
        _send_frame(pb.CommandSend(producer_id=1, sequence_id=2, txnid_least_bits=3)),
        _send_frame(pb.CommandSend(producer_id=1, sequence_id=2, is_chunk=True)),
        _send_frame(pb.CommandSend(producer_id=1, sequence_id=2, marker=True)),
        _send_frame(pb.CommandSend(producer_id=1, sequence_id=2, num_messages=-1)),  # a 10-byte int32
        frames.encode_command(pb.BaseCommand(type=pb.BaseCommand.SEND,  # no payload at all
                                             send=pb.CommandSend(producer_id=1, sequence_id=2))),
        frames.encode_command(C.ping()),
        plain + plain,  # two frames in one read
        plain[:-1],  # a partial frame
        plain[:10],
        b"",
    ]
    # fields out of the usual order, and a required one missing: the general path decides
    send = pb.CommandSend(producer_id=1, sequence_id=2).SerializeToString()
    for body in (b"\x32" + bytes([len(send)]) + send + b"\x08\x06", b"\x08\x06\x32\x02\x08\x01"):
        others.append(frames.frame_with_entry(body, frames.encode_entry(C.message_metadata("p", 0, 1), b"x")))
    # entries the broker refuses (the general path answers them) or stores differently
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=1, sequence_id=2))
    good_meta = C.message_metadata("p", 0, 1)
    bad_count = C.message_metadata("p", 0, 1)
    bad_count.num_messages_in_batch = 0
    missing = pb.MessageMetadata(producer_name="p")  # sequence_id and publish_time are required
    others += [
        frames.encode_payload_command(cmd, good_meta, b"x", checksum=False),
        frames.encode_payload_command(cmd, bad_count, b"x"),
        frames.encode_payload_command(cmd, missing.SerializePartialToString(), b"x"),
        frames.encode_payload_command(cmd, b"\xff\xff\xff", b"x"),  # metadata that does not parse
        frames.frame_with_entry(cmd, b"\x0e\x02" + bytes(4) + frames.encode_entry(good_meta, b"x")),  # broker entry metadata
        frames.frame_with_entry(cmd, b"\x0e\x01" + bytes(4) + b"\x00\x00\x10\x00" + b"short"),  # metadata size past the end
    ]
    for data in others:
        assert decode_lone_send(data, MAX) is None, data[:24].hex()
    assert decode_lone_send(plain, len(plain) - 5) is None  # over the frame size limit
    assert decode_lone_send(plain, MAX) is not None


async def test_sends_one_per_read_are_stored_and_answered_in_order(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Through a real broker connection: SENDs written one per read take the lone path and get
    their receipts (highest_sequence_id included); a bug while handling one is the general
    path's: logged as a SEND, and the connection is closed."""
    broker = await start_broker(nursery)
    conn = await TrioRawConnection.open(broker.port)
    await conn.send(C.producer("persistent://public/default/lone", 1, 1))
    await conn.wait_for(T.PRODUCER_SUCCESS)
    decoded: list[object] = []

    def recording(data: bytes, limit: int) -> object:
        decoded.append(decode_lone_send(data, limit))
        return decoded[-1]

    monkeypatch.setattr(connection_module, "decode_lone_send", recording)
    for seq in range(3):
        await conn.stream.send_all(_send_frame(pb.CommandSend(producer_id=1, sequence_id=seq, highest_sequence_id=seq + 10)))
        receipt = (await conn.wait_for(T.SEND_RECEIPT)).command.send_receipt
        assert (receipt.producer_id, receipt.sequence_id, receipt.highest_sequence_id) == (1, seq, seq + 10)
        assert receipt.message_id.entryId == seq
    assert len(decoded) == 3 and all(d is not None for d in decoded)  # all three took the lone path

    def bug(*args: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(broker.metrics, "published", bug)
    with caplog.at_level(logging.ERROR, logger="broker.connection"):
        await conn.stream.send_all(_send_frame(pb.CommandSend(producer_id=1, sequence_id=3)))
        with trio.fail_after(10):
            while await conn.stream.receive_some(65536):
                pass  # closed by the broker
    bugs = [r for r in caplog.records if r.exc_info and r.exc_info[0] is ZeroDivisionError]
    assert len(bugs) == 1 and bugs[0].getMessage().startswith("SEND (request None)")


def _receipts(data: bytes) -> list[int]:
    return [f.command.send_receipt.sequence_id for f in frames.FrameDecoder().feed(data)
            if f.command.type == T.SEND_RECEIPT]


async def _connected_producer(port: int) -> socket.socket:
    """A plain non-blocking client socket with producer 1 on it (set up over trio)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = TrioRawConnection(stream)
    await conn.send(C.connect("read-now-test"))
    await conn.wait_for(T.CONNECTED)
    await conn.send(C.producer("persistent://public/default/read-now", 1, 1))
    await conn.wait_for(T.PRODUCER_SUCCESS)
    plain = socket.socket(fileno=os.dup(stream.socket.fileno()))  # (the same connection)
    plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    plain.setblocking(False)
    return plain


def _recording_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reader's reads in order: "now" (read_now found bytes), "miss" (it found none),
    "wait" (receive_some: a wait and a scheduler round)."""
    reads: list[str] = []
    read_now, receive_some = socket_io.read_now, socket_io.receive_some

    def now(*args: Any) -> bytes | None:
        data = read_now(*args)
        reads.append("miss" if data is None else "now")
        return data

    async def wait(*args: Any) -> bytes:
        reads.append("wait")
        return await receive_some(*args)

    monkeypatch.setattr(socket_io, "read_now", now)
    monkeypatch.setattr(socket_io, "receive_some", wait)
    return reads


async def test_a_send_there_after_a_receipt_is_read_at_once_and_the_reader_still_waits_now_and_then(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer whose next SEND is in the socket when its receipt leaves (a fast client on
    the other core): the reader takes it with read_now, without a wait, but waits (a scheduler
    round for the process's other tasks) after at most _READ_NOW_MAX such reads in a row; every
    SEND is answered, in order."""
    broker = await start_broker(nursery)
    sock = await _connected_producer(broker.port)
    n = 60
    sends = [_send_frame(pb.CommandSend(producer_id=1, sequence_id=seq)) for seq in range(n)]
    decode = decode_lone_send

    def next_send_with_this_one(data: bytes, limit: int) -> object:
        lone = decode(data, limit)
        if lone is not None and lone.sequence_id + 1 < n:
            sock.send(sends[lone.sequence_id + 1])  # there before this one's receipt leaves
        return lone

    monkeypatch.setattr(connection_module, "decode_lone_send", next_send_with_this_one)
    reads = _recording_reads(monkeypatch)
    sock.send(sends[0])
    got = b""
    with trio.fail_after(10):
        while len(_receipts(got)) < n:
            await trio.sleep(0.005)
            with contextlib.suppress(BlockingIOError):
                got += sock.recv(1 << 20)
    assert _receipts(got) == list(range(n))
    assert reads.count("now") >= n // 2
    runs = "".join("n" if r == "now" else "w" for r in reads).split("w")
    assert max(map(len, runs)) <= connection_module._READ_NOW_MAX
    sock.close()


async def test_a_producer_whose_sends_are_never_there_at_once_is_seldom_read_before_a_wait(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer that sends after its receipt (a slow client turn-around): the reader's tries
    miss, so after the first misses it waits at once and tries only every _READ_NOW_PROBE-th
    read (no failed read per message)."""
    broker = await start_broker(nursery)
    conn = await TrioRawConnection.open(broker.port)
    await conn.send(C.producer("persistent://public/default/read-later", 1, 1))
    await conn.wait_for(T.PRODUCER_SUCCESS)
    reads = _recording_reads(monkeypatch)
    n = 80
    for seq in range(n):
        await conn.stream.send_all(_send_frame(pb.CommandSend(producer_id=1, sequence_id=seq)))
        assert (await conn.wait_for(T.SEND_RECEIPT)).command.send_receipt.sequence_id == seq
    assert reads.count("now") == 0
    assert reads.count("miss") <= 2 + n // connection_module._READ_NOW_PROBE
