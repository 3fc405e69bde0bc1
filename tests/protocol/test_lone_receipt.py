"""clients/protocol/lone_receipt.py: a read holding one plain SEND_RECEIPT decodes by hand to
exactly what the general decoder gives, and every other shape is left to it (None)."""

from __future__ import annotations

import random

from broker.receipt_frame import send_receipt_frame
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from clients.protocol.errors import ProtocolError
from clients.protocol.lone_receipt import MAX_LONE_RECEIPT, decode_lone_receipt

EDGES = [0, 1, 127, 128, 16383, 16384, 2**21, 2**28, 2**35, 2**63 - 1, 2**64 - 1]


def _general(data: bytes) -> tuple[int, int, int, int]:
    (frame,) = frames.FrameDecoder().feed(data)
    assert frame.command.type == pb.BaseCommand.SEND_RECEIPT
    r = frame.command.send_receipt
    return r.producer_id, r.sequence_id, C.signed64(r.message_id.ledgerId), C.signed64(r.message_id.entryId)


def test_receipts_decode_as_the_general_decoder_does() -> None:
    rng = random.Random(17)
    for _ in range(500):
        pid, seq, highest = rng.choice(EDGES), rng.choice(EDGES), rng.choice([0, *EDGES])
        ledger, entry = rng.choice([-1, *EDGES[:-1]]), rng.choice([-1, *EDGES[:-1]])
        for data in (send_receipt_frame(pid, seq, highest, ledger, entry),
                     frames.encode_command(C.send_receipt(pid, seq, ledger, entry,
                                                          highest_sequence_id=highest or None))):
            assert len(data) <= MAX_LONE_RECEIPT
            assert decode_lone_receipt(data) == _general(data) == (pid, seq, ledger, entry)


def test_every_other_shape_is_left_to_the_general_decoder() -> None:
    plain = frames.encode_command(C.send_receipt(1, 2, 3, 4))
    no_id = pb.BaseCommand(type=pb.BaseCommand.SEND_RECEIPT,
                           send_receipt=pb.CommandSendReceipt(producer_id=1, sequence_id=2))
    others = [
        frames.encode_command(C.send_receipt(1, 2, 3, 4, partition=0)),
        frames.encode_command(C.send_receipt(1, 2, 3, 4, partition=-1)),
        frames.encode_command(pb.BaseCommand(type=pb.BaseCommand.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
            producer_id=1, sequence_id=2, message_id=C.message_id(3, 4, batch_index=0)))),
        frames.encode_command(no_id),
        frames.encode_command(C.send_error(1, 2, pb.ServerError.PersistenceError, "no")),
        frames.encode_command(C.ping()),
        plain + plain,  # two frames in one read
        plain[:-1],  # a partial frame
        plain[:10],
        b"",
    ]
    # fields out of the usual order at the command level, entryId before ledgerId, a missing
    # producer_id: the general path decides
    sub = pb.CommandSendReceipt(producer_id=1, sequence_id=2, message_id=C.message_id(3, 4)).SerializeToString()
    for body in (b"\x3a" + bytes([len(sub)]) + sub + b"\x08\x07",
                 b"\x08\x07\x3a\x08\x08\x01\x10\x02\x1a\x04\x10\x04\x08\x03",
                 b"\x08\x07\x3a\x08\x10\x02\x1a\x04\x08\x03\x10\x04"):
        others.append(frames.frame_with_entry(body, b""))
    for data in others:
        assert decode_lone_receipt(data) is None, data.hex()
    assert decode_lone_receipt(plain) == (1, 2, 3, 4)


def test_corrupted_receipts_are_never_misread() -> None:
    """Random byte changes, cuts and extensions of valid receipts: whatever the hand decoder
    accepts, the general decoder reads as the same receipt (the rest it leaves alone)."""
    rng = random.Random(25)
    accepted = 0
    for _ in range(5000):
        data = bytearray(send_receipt_frame(rng.choice(EDGES), rng.choice(EDGES), rng.choice([0, 9]),
                                            rng.choice(EDGES[:-1]), rng.choice(EDGES[:-1])))
        for _ in range(rng.randint(1, 3)):
            kind = rng.random() if data else 1.0
            if kind < 0.7:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif kind < 0.85:
                del data[rng.randrange(len(data)):]
            else:
                data += bytes([rng.randrange(256)])
        got = decode_lone_receipt(bytes(data))
        if got is None:
            continue
        accepted += 1
        try:
            assert _general(bytes(data)) == got, data.hex()
        except ProtocolError as exc:
            raise AssertionError(f"accepted what the general decoder rejects: {data.hex()}") from exc
    assert accepted > 0
