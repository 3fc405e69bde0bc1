"""The dispatcher's hand-encoded MESSAGE frames and its lean metadata look, against the
protobuf-built frames and the full entry parse they replace."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.entry_meta import dispatch_info, entry_info, metadata_key
from broker.message_frame import message_frames
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol.errors import ProtocolError
from clients.protocol.pulsar_api_pb2 import BrokerEntryMetadata, MessageMetadata

u64 = st.integers(0, (1 << 64) - 1)
small = st.integers(0, 1 << 40)
ack_sets = st.none() | st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=4)


@settings(max_examples=300, deadline=None)
@given(consumer_id=u64, partition=st.integers(-(1 << 31), (1 << 31) - 1), epoch=st.none() | u64,
       items=st.lists(st.tuples(small | st.integers(-1, -1), small, st.integers(0, (1 << 32) - 1), ack_sets,
                                st.binary(max_size=64)), max_size=8))
def test_message_frames_are_the_protobuf_frames(consumer_id: int, partition: int, epoch: int | None,
                                                items: list[tuple[int, int, int, list[int] | None, bytes]]) -> None:
    expected = [frames.message_frame(C.message(consumer_id, lid, eid, partition=partition, redelivery_count=rc,
                                               ack_set=acks, consumer_epoch=epoch), data)
                for lid, eid, rc, acks, data in items]
    got, nbytes = message_frames(consumer_id, partition, epoch, items)
    assert got == expected and nbytes == sum(map(len, expected))


metadata = st.builds(
    lambda seq, t, n, okey, pkey, at: MessageMetadata(
        producer_name="p", sequence_id=seq, publish_time=t,
        **({"num_messages_in_batch": n} if n is not None else {}),
        **({"ordering_key": okey} if okey is not None else {}),
        **({"partition_key": pkey} if pkey is not None else {}),
        **({"deliver_at_time": at} if at is not None else {})),
    u64, u64, st.none() | st.integers(0, 1000), st.none() | st.binary(max_size=8),
    st.none() | st.text(max_size=8), st.none() | st.integers(0, 1 << 50))


@settings(max_examples=200, deadline=None)
@given(md=metadata, payload=st.binary(max_size=32), checksum=st.booleans(), broker_meta=st.booleans())
def test_dispatch_info_agrees_with_entry_info(md: MessageMetadata, payload: bytes, checksum: bool,
                                              broker_meta: bool) -> None:
    data = frames.encode_entry(md, payload, checksum=checksum)
    if broker_meta:
        bm = BrokerEntryMetadata(broker_timestamp=5, index=7).SerializeToString()
        data = struct.pack(">HI", frames.MAGIC_BROKER_ENTRY_METADATA, len(bm)) + bm + data
    full = entry_info(data)
    got, n = dispatch_info(data)
    assert n == full.num_messages
    assert metadata_key(got) == full.key
    assert got.deliver_at_time == full.deliver_at_time


@pytest.mark.parametrize("data", [b"", b"\x0e", b"\x0e\x01\x00\x00", b"\x00\x00\x00\x09abc", b"\x00\x00\x00\x02\xff\xff",
                                  b"\x00\x00\x00\x00"])
def test_dispatch_info_refuses_what_entry_info_refuses(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        entry_info(data)
    with pytest.raises(ProtocolError):
        dispatch_info(data)
