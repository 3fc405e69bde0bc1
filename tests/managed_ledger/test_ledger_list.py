"""Position arithmetic over a ledger list (pure; managed_ledger/ledger_list.py)."""

from managed_ledger.formats import LedgerInfo
from managed_ledger.ledger_list import LedgerList
from managed_ledger.position import Position as P


def _list() -> LedgerList:
    ll = LedgerList()
    ll.set([LedgerInfo(3, entries=2, size=20), LedgerInfo(5, entries=0), LedgerInfo(7, entries=3, size=30)])
    ll.append_current(LedgerInfo(9))
    return ll


def test_positions_skip_empty_and_ended_ledgers() -> None:
    ll = _list()
    assert ll.first_position() == P(3, -1)
    assert ll.next_valid_position(P(3, 1)) == P(7, 0)  # ledger 5 is empty
    assert ll.next_valid_position(P(7, 2)) == P(9, 0)  # the current ledger takes the next entry
    assert ll.normalize(P(4, 0)) == P(7, 0)  # a trimmed/missing ledger
    assert ll.previous_position(P(7, 0)) == P(3, 1)
    assert ll.previous_position(P(3, 0)) == P(3, -1)


def test_counts_offsets_and_membership() -> None:
    ll = _list()
    assert ll.number_of_entries == 5 and ll.total_size == 50 and ll.current_ledger_id == 9
    assert ll.count_entries_between(P(3, -1), P(7, 2)) == 5
    assert ll.count_entries_between(P(3, 0), P(7, 0)) == 2
    assert [ll.position_at_offset(P(3, -1), i) for i in (0, 2, 4, 5)] == [P(3, 0), P(7, 0), P(7, 2), None]
    assert ll.has_position(P(7, 2)) and not ll.has_position(P(7, 3)) and not ll.has_position(P(5, 0))
