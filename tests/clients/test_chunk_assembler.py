"""Chunked-message reassembly (pure; clients/chunk_assembler.py)."""

from clients.chunk_assembler import ChunkAssembler


def test_interleaved_messages_reassemble_in_order() -> None:
    a = ChunkAssembler(max_pending=10)
    assert a.add("u1", 0, 2, b"ab", (1, 0)) is None
    assert a.add("u2", 0, 2, b"xy", (1, 1)) is None
    assert a.add("u1", 1, 2, memoryview(b"cd"), (1, 2)) == (b"abcd", ((1, 0), (1, 2)))
    assert a.add("u2", 1, 2, b"z", (1, 3)) == (b"xyz", ((1, 1), (1, 3)))
    assert len(a) == 0


def test_out_of_sequence_chunk_drops_the_message_and_restart_works() -> None:
    a = ChunkAssembler(max_pending=10)
    a.add("u", 0, 3, b"a", (1, 0))
    assert a.add("u", 2, 3, b"c", (1, 2)) is None and len(a) == 0  # chunk 1 missing
    assert a.add("u", 1, 3, b"b", (1, 1)) is None  # no chunk 0 any more: dropped too
    a.add("u", 0, 3, b"a", (2, 0))  # the redelivery starts again from chunk 0
    a.add("u", 1, 3, b"b", (2, 1))
    assert a.add("u", 2, 3, b"c", (2, 2)) == (b"abc", ((2, 0), (2, 1), (2, 2)))


def test_oldest_incomplete_message_evicted_beyond_the_limit() -> None:
    a = ChunkAssembler(max_pending=2)
    a.add("u1", 0, 2, b"1", (1, 0))
    a.add("u2", 0, 2, b"2", (1, 1))
    a.add("u3", 0, 2, b"3", (1, 2))  # evicts u1
    assert len(a) == 2
    assert a.add("u1", 1, 2, b"x", (1, 3)) is None
    assert a.add("u3", 1, 2, b"x", (1, 4)) == (b"3x", ((1, 2), (1, 4)))
