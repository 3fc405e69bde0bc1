"""Batch payloads, ack sets and compression codecs."""

from __future__ import annotations

import struct

import lz4.block
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import batch as b
from clients.protocol import commands as c
from clients.protocol import compression as z
from clients.protocol import pulsar_api_pb2 as pb
from clients.protocol.errors import BatchFormatError, CompressionError


def test_batch_round_trip_and_layout() -> None:
    msgs = [
        (c.single_message_metadata(0, properties={"a": "1"}, partition_key="k0"), b"first"),
        (c.single_message_metadata(0, sequence_id=8, ordering_key=b"o"), b""),
        (c.single_message_metadata(0, event_time=5), b"third!"),
    ]
    payload = b.serialize_batch(msgs)
    # Hand-check the first record: [u32 size][SingleMessageMetadata][payload].
    (size,) = struct.unpack_from(">I", payload)
    first = pb.SingleMessageMetadata.FromString(payload[4 : 4 + size])
    assert first.payload_size == 5 and payload[4 + size : 9 + size] == b"first"
    parsed = b.parse_batch(payload, 3)
    assert [bytes(p) for _, p in parsed] == [b"first", b"", b"third!"]
    assert parsed[0][0].properties[0].key == "a" and parsed[0][0].partition_key == "k0"
    assert parsed[1][0].sequence_id == 8 and parsed[2][0].event_time == 5



@given(st.integers(0, 2**31 - 1), st.integers(0, 2**64 - 1))
def test_plain_metadata_matches_protobuf(payload_size: int, sequence_id: int) -> None:
    expected = pb.SingleMessageMetadata(payload_size=payload_size, sequence_id=sequence_id).SerializeToString()
    assert b.plain_message_metadata(payload_size, sequence_id) == expected


@given(st.lists(st.tuples(st.binary(max_size=200), st.integers(0, 2**64 - 1)), max_size=10))
def test_split_batch_reads_plain_records_without_protobuf(items: list[tuple[bytes, int]]) -> None:
    payload = b.serialize_batch((b.plain_message_metadata(len(data), seq), data) for data, seq in items)
    assert b.split_batch(payload, len(items)) == [(None, seq, data) for data, seq in items]


@given(st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2**64 - 1)), max_size=10))
def test_serialize_plain_batch_is_serialize_batch_of_plain_metadata(items: list[tuple[bytes, int]]) -> None:
    expected = b.serialize_batch((b.plain_message_metadata(len(data), seq), data) for data, seq in items)
    assert b.serialize_plain_batch(items) == expected


def test_varint_matches_protobuf_at_every_width() -> None:
    for bits in range(64):
        for value in {(1 << bits) - 1, 1 << bits, (1 << bits) + 1}:
            if value < 2**64:
                assert c.varint(value) == pb.SingleMessageMetadata(payload_size=0, sequence_id=value).SerializeToString()[3:]


def test_split_batch_falls_back_to_protobuf() -> None:
    payload = b.serialize_batch([
        (c.single_message_metadata(0, sequence_id=1), b"plain"),
        (c.single_message_metadata(0, properties={"k": "v"}, sequence_id=2), b"props"),
        (c.single_message_metadata(0), b"no-seq"),
    ])
    (m0, s0, p0), (m1, s1, p1), (m2, s2, p2) = b.split_batch(payload, 3)
    assert (m0, s0, p0) == (None, 1, b"plain") and (m2, s2, p2) == (None, -1, b"no-seq")
    assert m1 is not None and m1.properties[0].value == "v" and m1.sequence_id == 2 and (s1, p1) == (-1, b"props")
    assert not b.parse_batch(payload, 3)[2][0].HasField("sequence_id")


def test_serialize_batch_takes_pre_encoded_metadata() -> None:
    mixed = b.serialize_batch([(b.plain_message_metadata(3, 7), b"abc"), (c.single_message_metadata(0), b"de")])
    parsed = b.parse_batch(mixed, 2)
    assert [(m.sequence_id, bytes(p)) for m, p in parsed] == [(7, b"abc"), (0, b"de")]

def test_batch_entry_size_bounds_the_real_size() -> None:
    meta = c.single_message_metadata(0, properties={"k": "v"})
    assert b.batch_entry_size(meta, 300) >= len(b.serialize_batch([(meta, b"x" * 300)]))


@pytest.mark.parametrize("cut", [1, 3, 5, 10])
def test_truncated_batch_raises(cut: int) -> None:
    payload = b.serialize_batch([(c.single_message_metadata(0), b"abcdefgh")])
    with pytest.raises(BatchFormatError):
        b.parse_batch(payload[:-cut], 1)
    with pytest.raises(BatchFormatError):
        b.parse_batch(payload, 2)


def test_ack_set_java_bitset_layout() -> None:
    # Bits 0 and 63 in word 0 (bit 63 makes the signed long negative), bit 64 in word 1.
    words = b.ack_set_of([0, 63, 64], 70)
    assert words == [1 - 2**63, 1]
    assert b.unacked_indexes(words, 70) == {0, 63, 64}
    assert b.ack_set_of([], 10) == []
    assert b.unacked_indexes([], 3) == {0, 1, 2}  # no ack set: deliver all


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_ack_set_round_trip(case: tuple[int, set[int]]) -> None:
    n, unacked = case
    words = b.ack_set_of(unacked, n)
    assert all(-(2**63) <= w < 2**63 for w in words)
    if unacked:
        assert b.unacked_indexes(words, n) == unacked


@pytest.mark.parametrize("codec", [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_compression_round_trip(codec: int) -> None:
    assert z.available(codec)
    data = b"quire " * 2000 + bytes(range(256))
    packed = z.compress(codec, data)
    if codec != pb.NONE:
        assert len(packed) < len(data)
    assert z.decompress(codec, packed, len(data)) == data
    assert z.decompress(codec, z.compress(codec, b""), 0) == b""


def test_lz4_is_the_raw_block_format() -> None:
    # A 3-byte input is one literal run: token 0x30 then the bytes, no frame or size header.
    assert z.compress(pb.LZ4, b"abc") == b"\x30abc"
    assert z.decompress(pb.LZ4, b"\x30abc", 3) == b"abc"
    assert lz4.block.decompress(z.compress(pb.LZ4, b"x" * 500), uncompressed_size=500) == b"x" * 500


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_decompress_errors(codec: int) -> None:
    good = z.compress(codec, b"y" * 1000)
    with pytest.raises(CompressionError):
        z.decompress(codec, good, 999)  # size mismatch
    with pytest.raises(CompressionError):
        z.decompress(codec, b"\xff\x00garbage\x01", 1000)


def test_unknown_codec() -> None:
    assert not z.available(9)
    with pytest.raises(CompressionError):
        z.compress(9, b"x")
    with pytest.raises(CompressionError):
        z.decompress(9, b"x", 1)


def test_split_batch_gives_views_of_large_payloads() -> None:
    payload = b.serialize_batch([(b.plain_message_metadata(600, 1), b"a" * 600), (b.plain_message_metadata(5, 2), b"small")])
    (_, _, big), (_, _, small) = b.split_batch(payload, 2, views_from=512)
    assert type(big) is memoryview and big == b"a" * 600 and type(small) is bytes and small == b"small"
    assert all(type(p) is bytes for _, _, p in b.split_batch(payload, 2))


def test_split_batch_reads_a_span_in_place() -> None:
    # A batch inside larger bytes (a frame's payload in the read it arrived in) splits as the
    # batch alone, payloads sliced from the surrounding bytes; a span past the bytes is refused.
    items = [(b"a" * 600, 1), (b"small", 2), (b"", 3)]
    batch = b.serialize_plain_batch(items)
    around = b"x" * 17 + batch + b"y" * 9
    got = b.split_batch(around, 3, 512, 17, 17 + len(batch))
    assert got == b.split_batch(batch, 3, 512) == [(None, seq, data) for data, seq in items]
    assert type(got[0][2]) is memoryview and got[0][2].obj is around
    with pytest.raises(BatchFormatError):
        b.split_batch(around, 4, 512, 17, 17 + len(batch))  # the span ends before a 4th record
    with pytest.raises(BatchFormatError):
        b.split_batch(around, 3, 512, 17, len(around) + 1)


_SEQS = st.one_of(st.integers(0, 300), st.integers(16_300, 16_500), st.integers(2**21 - 50, 2**21 + 50),
                  st.integers(0, 2**64 - 1))


@given(st.lists(st.tuples(st.sampled_from([0, 5, 127, 128, 600, 16_383, 16_384]), _SEQS,
                          st.sampled_from(["plain", "plain", "plain", "no-seq", "property"])), max_size=40))
def test_split_batch_of_repeated_headers_matches_protobuf(records: list[tuple[int, int, str]]) -> None:
    # Runs of records with one payload size (the repeated-header fast path) mixed with sizes,
    # sequence id widths and metadata that break a run: every record reads as protobuf reads it.
    metas = []
    for size, seq, kind in records:
        meta = pb.SingleMessageMetadata(payload_size=size)
        if kind != "no-seq":
            meta.sequence_id = seq
        if kind == "property":
            meta.properties.add(key="k", value="v")
        metas.append(meta)
    payloads = [bytes([i % 251]) * size for i, (size, _, _) in enumerate(records)]
    batch = b.serialize_batch(zip([m.SerializeToString() for m in metas], payloads))
    got = b.split_batch(b"pad" + batch, len(records), 512, 3, 3 + len(batch))
    for meta, payload, (smm, seq, body) in zip(metas, payloads, got):
        assert bytes(body) == payload
        if smm is None:
            assert not meta.properties and seq == (meta.sequence_id if meta.HasField("sequence_id") else -1)
        else:
            assert smm == meta and seq == -1
    assert len(got) == len(records)


@given(st.integers(0, 20_000), st.integers(1, 300), st.integers(0, 2**63), st.integers(1, 3))
def test_split_uniform_batch_reads_same_size_records_as_split_batch(size: int, count: int, first: int, step: int) -> None:
    seqs = [first + i * step for i in range(count)]
    items = [(bytes([i % 251]) * size, seq) for i, seq in zip(range(count), seqs)]
    payload = b"head" + b.serialize_plain_batch(items) + b"tail"
    end = len(payload) - 4
    got = b.split_uniform_batch(payload, count, 512, 4, end)
    same_width = len({len(c.varint(s)) for s in seqs}) == 1
    if not same_width or len(c.varint(first)) > 9:
        assert got is None  # records at different strides: read one by one
        return
    assert got is not None
    assert [(None, s, bytes(p)) for s, p in zip(*got)] == [(None, s, bytes(p)) for _, s, p in b.split_batch(payload, count, 512, 4, end)]
    assert all(type(p) is (memoryview if size >= 512 else bytes) for p in got[1])


def test_split_uniform_batch_refuses_what_is_not_one_layout() -> None:
    plain = b.serialize_plain_batch([(b"abcd", 7), (b"efgh", 8)])
    assert b.split_uniform_batch(plain, 2) == ([7, 8], [b"abcd", b"efgh"])
    assert b.split_uniform_batch(plain + b"x", 2) is None  # trailing bytes
    assert b.split_uniform_batch(plain, 3) is None  # fewer records than announced
    assert b.split_uniform_batch(b.serialize_plain_batch([(b"abcd", 7), (b"efg", 8), (b"h", 9)]), 3) is None
    assert b.split_uniform_batch(b.serialize_plain_batch([(b"abcd", 127), (b"efgh", 128)]), 2) is None
    with_key = b.serialize_batch([(c.single_message_metadata(0, sequence_id=7, partition_key="k"), b"abcd")] * 2)
    assert b.split_uniform_batch(with_key, 2) is None
    # One record's header byte changed (its metadata size): not uniform, whatever the stride.
    broken = bytearray(plain)
    broken[len(plain) // 2 + 3] ^= 1
    assert b.split_uniform_batch(bytes(broken), 2) is None
    # A sequence id's varint cut short (its continuation bit cleared) is refused.
    bad_seq = bytearray(b.serialize_plain_batch([(b"ab", 200), (b"cd", 201)]))
    bad_seq[4 + 3] &= 0x7F
    assert b.split_uniform_batch(bytes(bad_seq), 2) is None
    assert b.split_uniform_batch(memoryview(plain), 2) is None  # bytes only (split_batch copies)
