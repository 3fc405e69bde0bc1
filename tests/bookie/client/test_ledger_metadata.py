"""Pure tests of the ledger metadata value: validation, transitions, msgpack round trip."""

from __future__ import annotations

import pytest

from bookie.client.ledger_metadata import (
    LedgerMetadata,
    LedgerState,
    MetadataFormatError,
    decode_metadata,
    encode_metadata,
    master_key,
    password_hash,
)


def _md(**kw):
    base = dict(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, ensembles=((0, ("a:1", "b:1", "c:1")),))
    base.update(kw)
    return LedgerMetadata(**base)


def test_round_trip_all_fields():
    md = _md(password_hash=password_hash(b"pw"), ctime_ms=123, custom_metadata={"k": b"\x00v"})
    md = md.with_ensemble(10, ("a:1", "d:1", "c:1")).closed(41, 4096)
    back = decode_metadata(encode_metadata(md))
    assert back == md
    assert back.state is LedgerState.CLOSED and back.last_entry_id == 41 and back.length == 4096


def test_validation():
    with pytest.raises(ValueError):
        _md(ack_quorum_size=3)
    with pytest.raises(ValueError):
        _md(ensembles=((0, ("a:1", "a:1", "c:1")),))
    with pytest.raises(ValueError):
        _md(ensembles=((1, ("a:1", "b:1", "c:1")),))


def test_ensemble_for_and_segment_replacement():
    md = _md().with_ensemble(5, ("a:1", "d:1", "c:1"))
    assert md.ensemble_for(0) == ("a:1", "b:1", "c:1")
    assert md.ensemble_for(4) == ("a:1", "b:1", "c:1")
    assert md.ensemble_for(5) == ("a:1", "d:1", "c:1")
    assert md.ensemble_for(10**9) == ("a:1", "d:1", "c:1")
    # a second change at the same LAC+1 replaces the last segment instead of adding one
    md2 = md.with_ensemble(5, ("a:1", "d:1", "e:1"))
    assert len(md2.ensembles) == 2 and md2.last_ensemble == ("a:1", "d:1", "e:1")
    assert md2.last_ensemble_first_entry == 5
    with pytest.raises(ValueError):
        md.with_ensemble(3, ("a:1", "b:1", "e:1"))


def test_garbage_is_rejected():
    for junk in (b"", b"\x01\x02", b"\x80", encode_metadata(_md())[:-3]):
        with pytest.raises(MetadataFormatError):
            decode_metadata(junk)


def test_keys_are_stable_and_distinct():
    assert master_key(b"x") == master_key(b"x") and len(master_key(b"x")) == 20
    assert master_key(b"x") != master_key(b"y")
    assert password_hash(b"x") != master_key(b"x")
