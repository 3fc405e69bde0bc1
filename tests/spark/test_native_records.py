"""The compiled batch decoder gives the Python decoder's record batches, or leaves the answer to it.

Every decode here runs twice through :class:`EntryDecoder`, with the extension and without it
(``native_records.EXT`` None, what ``QUIRE_NO_NATIVE=1`` or a missing build gives): the outcomes
must be equal (the same record batches, or the same exception). Random runs (hypothesis: keys,
properties, event times, empty and big payloads, repeated headers, cut ranges, single messages
and compressed entries between the batches) also check that the extension answered for every
ordinary run; a fixed-seed corruption fuzz (byte flips, truncations, insertions, wrong counts)
checks it never answers differently from the Python path and never crashes the process.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.protocol import compression
from clients.protocol.pulsar_api_pb2 import MessageMetadata, SingleMessageMetadata
from spark_connector import entries, native_records
from spark_connector.positions import EARLIEST, LATEST, Pos

TOPIC = "persistent://public/default/t-partition-2"
ROOT = Path(__file__).resolve().parents[2]
EVENT_MAX = (2**63 - 1) // 1000  # the last event time (ms) the extension converts to microseconds
EXT = native_records.EXT

needs_ext = pytest.mark.skipif(EXT is None and os.environ.get(native_records.NO_NATIVE_ENV, "") not in ("", "0"),
                               reason="QUIRE_NO_NATIVE is set")


def _batch(records: list[tuple[SingleMessageMetadata, bytes]]) -> bytes:
    return b"".join(struct.pack(">I", m.ByteSize()) + m.SerializeToString() + p for m, p in records)


def _outcome(items: list[Any], start: Pos, end: Pos, batch_rows: int, native: bool,
             monkeypatch: pytest.MonkeyPatch, answered: list[bool] | None = None) -> tuple[Any, ...]:
    """``("rows", table)`` or ``("error", type, message)`` of decoding ``items`` in ``[start, end)``."""
    real = native_records.run_columns

    def spy(*args: Any) -> Any:
        got = real(*args)
        if answered is not None:
            answered.append(got is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(native_records, "EXT", EXT if native else None)
        m.setattr(native_records, "run_columns", spy)
        d = entries.EntryDecoder(TOPIC, 2, start, end)
        try:
            return "rows", pa.Table.from_batches(list(d.batches(iter(items), batch_rows)), schema=d.arrow_schema)
        except Exception as exc:  # noqa: BLE001  (compared, not hidden)
            return "error", type(exc), str(exc)


def _same_outcome(items: list[Any], start: Pos, end: Pos, batch_rows: int, monkeypatch: pytest.MonkeyPatch,
                  answered: list[bool] | None = None) -> tuple[Any, ...]:
    python = _outcome(items, start, end, batch_rows, False, monkeypatch)
    native = _outcome(items, start, end, batch_rows, True, monkeypatch, answered)
    assert native[0] == python[0], (native[:3], python[:3])
    if python[0] == "rows":
        assert native[1].equals(python[1])
    else:
        assert native[1:] == python[1:]
    return python


# -- random runs -----------------------------------------------------------------------------------

texts = st.text(max_size=6) | st.sampled_from(["", "k", "ключ", "x" * 200, "\U0001F600"])
payloads = (st.binary(max_size=40) | st.just(b"")
            | st.sampled_from([bytes(70_000), b"\x00\x00\x00\x05\x18\x00" * 5, b"\x00" * 300])
            | st.integers(1000, 5000).map(lambda n: random.Random(n).randbytes(n)))


@st.composite
def records(draw: Any, ordinary: bool) -> tuple[SingleMessageMetadata, bytes]:
    """One record; ``ordinary``: nothing the extension leaves to Python (sequence ids of ten
    bytes, event times past microseconds)."""
    payload = draw(payloads)
    m = SingleMessageMetadata(payload_size=len(payload))
    key = draw(st.none() | texts)
    if key is not None:
        m.partition_key = key
    for k, v in draw(st.lists(st.tuples(texts, texts), max_size=3)):
        m.properties.add(key=k, value=v)
    events = [0, 1, 127, 128, 1_700_000_000_123, EVENT_MAX] + ([] if ordinary else [EVENT_MAX + 1, 2**64 - 1])
    event = draw(st.none() | st.sampled_from(events))
    if event is not None:
        m.event_time = event
    seqs = [0, 5, 300, 70_000, 2**40] + ([] if ordinary else [2**64 - 1])
    seq = draw(st.none() | st.sampled_from(seqs))
    if seq is not None:
        m.sequence_id = seq
    if draw(st.booleans()):
        m.ordering_key = draw(st.binary(max_size=3))
    for flag in ("compacted_out", "null_value", "null_partition_key", "partition_key_b64_encoded"):
        if draw(st.integers(0, 9)) == 0:
            setattr(m, flag, True)
    return m, payload


@st.composite
def runs(draw: Any, ordinary: bool) -> tuple[list[Any], Pos, Pos, int]:
    """Entries of ledger 7 (batches, some repeating one record, a few single messages and
    compressed batches), a range over them and the decoder's batch_rows."""
    items: list[Any] = []
    for entry in range(draw(st.integers(1, 6))):
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1_700_000_000_000 + entry)
        kind = draw(st.sampled_from(["batch", "batch", "batch", "repeated", "single", "compressed"]))
        if kind == "single":  # decoded apart: its properties go between the extension's
            meta.partition_key = "single"
            for k, v in draw(st.lists(st.tuples(texts, texts), max_size=2)):
                meta.properties.add(key=k, value=v)
            items.append((7, entry, meta, draw(st.binary(max_size=20))))
            continue
        if kind == "repeated":  # one header repeated, as a producer without keys writes it
            one = draw(records(ordinary))
            recs = [one] * draw(st.integers(1, 300))
        else:
            recs = draw(st.lists(records(ordinary), min_size=1, max_size=40))
        meta.num_messages_in_batch = len(recs)
        body = _batch(recs)
        if kind == "compressed":
            meta.compression = compression.LZ4
            meta.uncompressed_size = len(body)
            body = compression.compress(compression.LZ4, body)
        items.append((7, entry, meta, body))
    last = len(items) - 1
    start = draw(st.sampled_from([EARLIEST, Pos(7, 0, 0), Pos(7, min(1, last), 3), Pos(7, last, 1)]))
    end = draw(st.sampled_from([LATEST, Pos(7, last + 1), Pos(7, last, 2), Pos(7, last, 0), Pos(7, last)]))
    return items, start, end, draw(st.sampled_from([5, 50, 1 << 20]))


@needs_ext
def test_the_extension_is_built_and_current() -> None:
    assert EXT is not None, native_records.STATUS
    assert native_records.STATUS == "native"


@needs_ext
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.function_scoped_fixture])
@given(run=runs(ordinary=True))
def test_ordinary_runs_decode_natively_to_the_python_rows(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    items, start, end, batch_rows = run
    answered: list[bool] = []
    assert _same_outcome(items, start, end, batch_rows, monkeypatch, answered)[0] == "rows"
    assert all(answered), answered  # the extension answered for every run of batches


@needs_ext
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(run=runs(ordinary=False))
def test_runs_the_extension_leaves_to_python_give_the_python_outcome(run: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    items, start, end, batch_rows = run
    _same_outcome(items, start, end, batch_rows, monkeypatch)


# -- corruption ------------------------------------------------------------------------------------

def _valid_items(rnd: random.Random) -> list[Any]:
    items = []
    for entry in range(3):
        n = rnd.choice([1, 3, 40])
        recs = []
        for i in range(n):
            payload = rnd.randbytes(rnd.choice([0, 1, 10, 100]))
            m = SingleMessageMetadata(payload_size=len(payload), sequence_id=rnd.choice([1, 300]))
            if rnd.random() < 0.6:
                m.partition_key = rnd.choice(["k", "ключ", str(i)])
            if rnd.random() < 0.2:
                m.properties.add(key="p", value=rnd.choice(["", "v", "é"]))
            if rnd.random() < 0.2:
                m.event_time = rnd.choice([1, 1_700_000_000_123])
            if rnd.random() < 0.05:
                m.ordering_key = b"o"
            recs.append((m, payload))
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1_700_000_000_000 + entry,
                               num_messages_in_batch=n)
        items.append((7, entry, meta, _batch(recs)))
    return items


def _damage(rnd: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    how = rnd.choice(["flip", "flip", "flips", "truncate", "insert", "append", "zero"])
    at = rnd.randrange(len(b)) if b else 0
    if how == "flip" and b:
        b[at] ^= 1 << rnd.randrange(8)
    elif how == "flips" and b:
        for _ in range(rnd.randint(2, 6)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    elif how == "truncate":
        del b[at:]
    elif how == "insert":
        b[at:at] = rnd.randbytes(rnd.randint(1, 4))
    elif how == "append":
        b += rnd.randbytes(rnd.randint(1, 6))
    elif b:
        b[at] = 0
    return bytes(b)


@needs_ext
@pytest.mark.parametrize("seed", range(3))
def test_corrupt_batches_give_the_python_outcome(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    outcomes: dict[str, int] = {}
    for _ in range(150):
        items = _valid_items(rnd)
        victim = rnd.randrange(len(items))
        ledger, entry, meta, body = items[victim]
        if rnd.random() < 0.15:  # a count that does not match the records
            meta.num_messages_in_batch = max(meta.num_messages_in_batch + rnd.choice([-1, 1]), 1)
        else:
            body = _damage(rnd, body)
        items[victim] = (ledger, entry, meta, body)
        got = _same_outcome(items, EARLIEST, LATEST, 1 << 20, monkeypatch)
        outcomes[got[0]] = outcomes.get(got[0], 0) + 1
    assert outcomes.get("error", 0) > 10 and outcomes.get("rows", 0) > 10, outcomes


@needs_ext
def test_the_extension_survives_random_bytes_and_corrupt_records() -> None:
    """Straight calls (thousands, no Arrow): any answer it gives has one row per record in range."""
    rnd = random.Random(99)
    base = _valid_items(rnd)
    for _ in range(5000):
        bodies = [_damage(rnd, it[3]) if rnd.random() < 0.7 else it[3] for it in base]
        if rnd.random() < 0.2:
            bodies[rnd.randrange(len(bodies))] = rnd.randbytes(rnd.randint(0, 64))
        counts = [it[2].num_messages_in_batch for it in base]
        got = EXT.decode(bodies, counts, [0] * len(bodies), [1 << 31] * len(bodies), [b"\x08\x07"] * len(bodies),
                         [1, 2, 3], bytearray)
        if got is not None:
            assert got[0] <= sum(counts)
    one = [b"\x00\x00\x00\x02\x18\x01x"]
    with pytest.raises(ValueError):
        EXT.decode(one, [1, 2], [0], [1], [b""], [0], bytearray)
    with pytest.raises(TypeError):
        EXT.decode(one, [1], [0], [1], ["str"], [0], bytearray)
    with pytest.raises(BufferError):  # allocate must give writable buffers
        EXT.decode(one, [1], [0], [1], [b"P"], [5], bytes)
    with pytest.raises(ValueError, match="too small"):
        EXT.decode(one, [1], [0], [1], [b"P"], [5], lambda n: bytearray(n - 1 if n else 0))
    got = EXT.decode([memoryview(one[0])], [1], [0], [1], [b"P"], [5], bytearray)
    assert got[:2] == (1, b"x") and bytes(got[7]) == b"P \x000\x01"
    # counts, ranges and publish times past 64 bits: the Python path's answer
    assert EXT.decode(one, [1], [0], [1], [b"P"], [2**64], bytearray) is None


def test_quire_no_native_forces_the_python_decoder() -> None:
    code = ("from spark_connector import native_records as n, scanned_rows as s\n"
            "print(n.EXT is None, n.STATUS)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), native_records.NO_NATIVE_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True disabled by QUIRE_NO_NATIVE", out.stdout + out.stderr


UTF8_CASES = [b"ok", "ключ".encode(), "\U0010FFFF".encode(), b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
              b"\xed\x9f\xbf", b"\xf4\x90\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe2\x82",
              b"\x80", b"a\xffb"]


@needs_ext
@pytest.mark.parametrize("raw", UTF8_CASES)
@pytest.mark.parametrize("where", ["key", "property key", "property value", "key of a record out of range"])
def test_text_that_is_not_utf8_gives_the_python_outcome(raw: bytes, where: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def field(tag: int, body: bytes) -> bytes:
        return bytes([tag, len(body)]) + body

    good = field(0x12, b"k") + b"\x18\x01"
    if where in ("key", "key of a record out of range"):
        odd = field(0x12, raw) + b"\x18\x01"
    else:
        kv = field(0x0A, raw) + field(0x12, b"v") if where == "property key" else field(0x0A, b"p") + field(0x12, raw)
        odd = field(0x0A, kv) + b"\x18\x01"
    records = [odd if i == 0 else good for i in range(40)]
    body = b"".join(struct.pack(">I", len(r)) + r + b"x" for r in records)
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=40)
    start = Pos(7, 0, 1) if where == "key of a record out of range" else EARLIEST
    answered: list[bool] = []
    got = _same_outcome([(7, 0, meta, body)], start, LATEST, 1 << 20, monkeypatch, answered)
    valid = raw in (b"ok", "ключ".encode(), "\U0010FFFF".encode(), b"\xed\x9f\xbf")
    assert answered == [valid], (got[:3], answered)


@needs_ext
def test_a_build_of_another_c_file_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Path(native_records.__file__).with_name("native_records.c").read_bytes()
    monkeypatch.setattr(native_records, "__file__", str(tmp_path / "native_records.py"))
    assert native_records._load()[1] == "native"  # no C file beside it (an installed package): trusted
    (tmp_path / "native_records.c").write_bytes(source)
    assert native_records._load()[1] == "native"
    (tmp_path / "native_records.c").write_bytes(source + b"/* changed */\n")
    ext, status = native_records._load()
    assert ext is None and status.startswith("stale"), status
