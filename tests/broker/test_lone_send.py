"""broker/lone_send.py: a read holding one plain SEND frame decodes by hand to exactly what the
general decoder gives, and every other shape is left to the general decoder (None)."""

from __future__ import annotations

import random

from broker.lone_send import decode_lone_send
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb

MAX = frames.DEFAULT_MAX_FRAME_SIZE


def _send_frame(send: pb.CommandSend, payload: bytes = b"payload", *, checksum: bool = True) -> bytes:
    meta = C.message_metadata("producer-1", send.sequence_id, 1_700_000_000_000)
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND, send=send)
    return frames.encode_payload_command(cmd, meta, payload, checksum=checksum)


def _assert_same_as_general(data: bytes) -> None:
    lone = decode_lone_send(data, MAX)
    assert lone is not None
    fields, frame = lone
    (general,) = frames.FrameDecoder().feed(data)
    send = general.command.send
    assert (fields.producer_id, fields.sequence_id, fields.num_messages, fields.highest_sequence_id) == (
        send.producer_id, send.sequence_id, send.num_messages, send.highest_sequence_id)
    assert frame.command == general.command
    assert frame.checksum_ok == general.checksum_ok
    assert bytes(frame.entry or b"") == bytes(general.entry or b"")
    assert bytes(frame.metadata_and_payload or b"") == bytes(general.metadata_and_payload or b"")
    assert frame.stored_entry() == general.stored_entry()


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


def test_a_corrupted_payload_is_reported_as_by_the_general_decoder() -> None:
    data = bytearray(_send_frame(pb.CommandSend(producer_id=1, sequence_id=2)))
    data[-1] ^= 0xFF  # the payload no longer matches its CRC32C
    lone = decode_lone_send(bytes(data), MAX)
    assert lone is not None and lone[1].checksum_ok is False
    _assert_same_as_general(bytes(data))


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
    for data in others:
        assert decode_lone_send(data, MAX) is None, data[:24].hex()
    assert decode_lone_send(plain, len(plain) - 5) is None  # over the frame size limit
    assert decode_lone_send(plain, MAX) is not None
