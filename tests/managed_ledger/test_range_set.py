"""RangeSet: property tests against a plain set model, and the 10,000+ holes case."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from managed_ledger.range_set import RangeSet

ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove_up_to", "remove_from"]),
        st.integers(1, 3),
        st.integers(0, 40),
        st.integers(0, 6),
    ),
    max_size=60,
)


def _model_ranges(model: set[tuple[int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    out: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for p in sorted(model):
        if out and out[-1][1][0] == p[0] and out[-1][1][1] == p[1] - 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


@settings(max_examples=300, deadline=None)
@given(ops)
def test_matches_set_model(operations: list[tuple[str, int, int, int]]) -> None:
    rs = RangeSet()
    model: set[tuple[int, int]] = set()
    for op, ledger, entry, width in operations:
        if op == "add":
            rs.add((ledger, entry), (ledger, entry + width))
            model |= {(ledger, e) for e in range(entry, entry + width + 1)}
        elif op == "remove_up_to":
            rs.remove_up_to((ledger, entry))
            model = {p for p in model if p > (ledger, entry)}
        else:
            rs.remove_from((ledger, entry))
            model = {p for p in model if p < (ledger, entry)}
        assert rs.ranges() == _model_ranges(model)
        assert rs.entry_count == len(model)
    for ledger in range(1, 4):
        for entry in range(0, 50):
            assert ((ledger, entry) in rs) == ((ledger, entry) in model)
    lo, hi = (2, 5), (3, 10)
    assert rs.count_between(lo, hi) == len([p for p in model if lo <= p <= hi])


def test_flat_roundtrip_and_pulsar_string() -> None:
    rs = RangeSet()
    rs.add((5, 3), (5, 4))
    rs.add((6, 0))
    assert RangeSet.from_flat(rs.to_flat()).ranges() == rs.ranges()
    assert rs.to_pulsar_string() == "[(5:2..5:4], (6:-1..6:0]]"
    assert rs.to_flat(limit=1) == [5, 3, 4]


def test_many_holes_are_cheap() -> None:
    rs = RangeSet()
    # every other entry acked: 20,000 disjoint ranges, inserted in a scattered order
    order = list(range(0, 40000, 2))
    order = order[::2] + order[1::2]
    for e in order:
        rs.add((1, e))
    assert len(rs) == 20000 and rs.entry_count == 20000
    assert (1, 39998) in rs and (1, 39999) not in rs
    # filling the holes collapses everything into one range
    for e in range(1, 40000, 2):
        rs.add((1, e))
    assert len(rs) == 1 and rs.entry_count == 40000
