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
