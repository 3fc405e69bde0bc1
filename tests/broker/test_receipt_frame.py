"""The hand-encoded SEND_RECEIPT frame is byte for byte what the generated protobuf code makes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.receipt_frame import send_receipt_frame
from clients.protocol import commands as C
from clients.protocol import frames

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(u64, u64, u64, st.integers(min_value=-1, max_value=(1 << 63) - 1), st.integers(min_value=-1, max_value=(1 << 63) - 1))
def test_same_bytes_as_protobuf(producer_id: int, sequence_id: int, highest: int, ledger_id: int, entry_id: int) -> None:
    expected = frames.encode_command(C.send_receipt(producer_id, sequence_id, ledger_id, entry_id,
                                                    highest_sequence_id=highest or None))
    assert send_receipt_frame(producer_id, sequence_id, highest, ledger_id, entry_id) == expected


def test_decodes_as_a_receipt() -> None:
    dec = frames.FrameDecoder()
    (frame,) = dec.feed(send_receipt_frame(3, 41, 0, 17, 5))
    r = frame.command.send_receipt
    assert (r.producer_id, r.sequence_id, r.message_id.ledgerId, r.message_id.entryId) == (3, 41, 17, 5)
    assert not r.HasField("highest_sequence_id")


def test_same_bytes_as_protobuf_at_every_varint_length() -> None:
    """Ids at the edges of each unrolled varint length (1, 2, 3 bytes, then the loop)."""
    edges = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**63 - 1]
    for n in edges:
        for args in [(n, n, n, n, n), (1, n, 0, 7, n), (n, 5, 0, n, 3), (2, 3, n, 4, -1)]:
            pid, seq, highest, lid, eid = args
            expected = frames.encode_command(C.send_receipt(pid, seq, lid, eid, highest_sequence_id=highest or None))
            assert send_receipt_frame(pid, seq, highest, lid, eid) == expected, args
