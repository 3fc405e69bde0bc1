"""MessageId: byte-compatible serialisation and the official client's ordering/equality rules."""

from __future__ import annotations

import itertools

import pulsar
import pytest

from clients import MessageId

CASES = [(-1, 5, 7, -1), (2, 5, 7, 3), (0, 0, 0, -1), (-1, 5, 7, 0), (0, 5, 7, -1), (-1, 5, 6, 9), (-1, 5, 7, 2)]


@pytest.mark.parametrize("args", CASES)
def test_serialize_matches_official(args: tuple[int, int, int, int]) -> None:
    ours, theirs = MessageId(*args), pulsar.MessageId(*args)
    assert ours.serialize() == theirs.serialize()
    assert str(ours) == str(theirs)
    back = MessageId.deserialize(theirs.serialize())
    assert back == ours
    official_back = pulsar.MessageId.deserialize(ours.serialize())
    assert (official_back.ledger_id(), official_back.entry_id(), official_back.partition(),
            official_back.batch_index()) == (args[1], args[2], args[0], args[3])


def test_earliest_latest_match_official() -> None:
    assert MessageId.earliest.serialize() == pulsar.MessageId.earliest.serialize()
    assert MessageId.latest.serialize() == pulsar.MessageId.latest.serialize()
    assert str(MessageId.latest) == str(pulsar.MessageId.latest)
    assert MessageId.coerce(pulsar.MessageId.earliest).is_earliest()
    assert MessageId.coerce(pulsar.MessageId.latest).is_latest()


@pytest.mark.parametrize("a,b", list(itertools.product(CASES, CASES)))
def test_comparisons_match_official(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    oa, ob = pulsar.MessageId(*a)._msg_id, pulsar.MessageId(*b)._msg_id
    qa, qb = MessageId(*a), MessageId(*b)
    assert (qa == qb) == (oa == ob)
    assert (qa < qb) == (oa < ob)
    assert (qa <= qb) == (oa <= ob)
    assert (qa > qb) == (oa > ob)
    assert (qa >= qb) == (oa >= ob)
    if qa == qb:
        assert hash(qa) == hash(qb)


def test_a_batched_message_builds_its_id_on_first_use() -> None:
    from clients.message import EntryInfo, Message

    info = EntryInfo("persistent://t/n/a", 5, 0, "p", None, b"", (7, 9), 2, 10)
    msg = Message(b"x", None, info, 42, None, None, 3)
    mid = msg.message_id()
    assert (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (2, 7, 9, 3)
    assert mid.batch_size == 10 and mid.topic == "persistent://t/n/a" and mid.chunk_ids == ()
    assert msg.message_id() is mid and msg._id is mid  # built once
    eager = MessageId(2, 7, 9, 3, 10, "persistent://t/n/a")
    assert Message(b"x", eager, info, 42).message_id() is eager
