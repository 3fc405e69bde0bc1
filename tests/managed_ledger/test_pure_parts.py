"""Ack sets, formats, config, rollover policy and the entry cache."""

from __future__ import annotations

import random

import pytest

from managed_ledger.ack_set import AckSet
from managed_ledger.config import MB, ManagedLedgerConfig
from managed_ledger.entry_cache import EntryCacheManager
from managed_ledger.formats import (
    CursorInfo,
    FormatError,
    LedgerInfo,
    ManagedLedgerInfo,
    PositionInfo,
    decode_cursor_info,
    decode_ml_info,
    decode_position_info,
    encode_cursor_info,
    encode_ml_info,
    encode_position_info,
)
from managed_ledger.position import Position
from managed_ledger.rollover import current_ledger_is_full, jittered_max_rollover_ms


def test_ack_set_java_long_layout() -> None:
    s = AckSet.all_unacked(70)
    # Java: BitSet with bits 0..69 set -> [-1L, 63L]
    assert s.to_words() == [-1, 63]
    assert AckSet.from_words([-1, 63]) == s
    acked = s.intersect(AckSet.from_indexes(range(1, 70)))  # message 0 acked
    assert acked.cardinality() == 69 and 0 not in acked.indexes()
    assert AckSet.from_words(AckSet.from_indexes([63]).to_words()).indexes() == [63]
    assert AckSet.from_indexes([63]).to_words() == [-(1 << 63)]
    assert s.intersect(AckSet()).is_empty()


def test_formats_roundtrip() -> None:
    info = ManagedLedgerInfo([LedgerInfo(3, 10, 1000, 123, 100), LedgerInfo(4)], (3, 9), {"a": "b"})
    assert decode_ml_info(encode_ml_info(info)) == info
    assert decode_ml_info(b"") == ManagedLedgerInfo()
    pi = PositionInfo((3, 4), [3, 6, 8], [[3, 5, [-1, 3]]], {"p": 7})
    assert decode_position_info(encode_position_info(pi)) == pi
    ci = CursorInfo(12, pi, 99, {"x": "y"})
    assert decode_cursor_info(encode_cursor_info(ci)) == ci
    with pytest.raises(FormatError):
        decode_position_info(b"\xc1garbage")
    with pytest.raises(FormatError):
        decode_cursor_info(encode_ml_info(info))


def test_config_defaults_and_toml(tmp_path) -> None:
    c = ManagedLedgerConfig()
    assert (c.max_entries_per_ledger, c.max_unacked_ranges_to_persist) == (50000, 10000)
    assert c.max_unacked_ranges_to_persist_in_metadata_store == 1000
    assert c.retention_check_interval_seconds == 120
    p = tmp_path / "b.toml"
    p.write_text("[managed_ledger]\nmanaged_ledger_max_entries_per_ledger = 7\nretention_size_mb = -1\n")
    c2 = ManagedLedgerConfig.from_toml(str(p))
    assert c2.max_entries_per_ledger == 7 and c2.retention_size_mb == -1


def test_rollover_policy() -> None:
    c = ManagedLedgerConfig(max_entries_per_ledger=10, max_size_per_ledger_mb=1, maximum_rollover_time_ms=1000)
    full = lambda **kw: current_ledger_is_full(config=c, max_rollover_ms=1000, **kw)  # noqa: E731
    assert not full(entries=9, size=10, created_ms=0, now_ms=10)
    assert full(entries=10, size=10, created_ms=0, now_ms=10)
    assert full(entries=1, size=MB, created_ms=0, now_ms=10)
    assert full(entries=1, size=1, created_ms=0, now_ms=1000)
    gated = c.replace(minimum_rollover_time_ms=500)
    assert not current_ledger_is_full(
        entries=10, size=0, created_ms=0, now_ms=400, config=gated, max_rollover_ms=1000
    )
    assert current_ledger_is_full(entries=10, size=0, created_ms=0, now_ms=501, config=gated, max_rollover_ms=1000)
    rng = random.Random(1)
    for _ in range(50):
        assert 1000 <= jittered_max_rollover_ms(c, rng) <= 1050


def test_entry_cache_budget_and_invalidation() -> None:
    m = EntryCacheManager(max_bytes=1000)  # eviction down to the 0.9 watermark
    a, b = m.cache_for("a"), m.cache_for("b")
    for i in range(4):
        a.insert(Position(1, i), b"x" * 100)
    for i in range(6):
        b.insert_new(Position(7, i), b"y" * 100)
    assert m.size == 1000 and m.count == 10 and m.evictions == 0
    b.insert_new(Position(7, 6), b"y" * 100)  # over budget: the largest cache's oldest go
    assert m.size == 900 and m.evictions == 2
    assert b.get_range(7, 0, 9) == [] and [e.entry_id for e in b.get_range(7, 2, 9)] == [2, 3, 4, 5, 6]
    assert [e.data for e in a.get_range(1, 0, 3)] == [b"x" * 100] * 4
    a.invalidate_before(Position(1, 2))
    assert [e.entry_id for e in a.get_range(1, 0, 9)] == [] and [e.entry_id for e in a.get_range(1, 2, 9)] == [2, 3]
    assert a.size == 200 and m.size == 700
    b.invalidate_ledger(7)
    assert m.size == 200 and m.count == 2 and list(m._non_empty) == [a]
    a.insert_new(Position(2, 0), b"z" * 2000)  # larger than the whole budget: not cached
    assert a.get_range(2, 0, 0) == [] and m.size == 200
    a.clear()
    assert m.size == 0 and not m._non_empty
    for i in range(5000):  # a tailing cursor: nothing piles up
        a.insert_new(Position(3, i), b"z")
        a.invalidate_before(Position(3, i + 1))
    assert m.size == 0 and a.count == 0
