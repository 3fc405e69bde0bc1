"""The numpy batch scan gives the rows the per-record decoder gives, and falls back on what it cannot vouch for.

Random batches (keys, properties, event times, ordering keys, compacted records, sequence ids of
every varint width, payloads full of zero bytes that look like record starts) are decoded twice:
by the scan (``VECTOR_MIN`` 1) and record by record (``VECTOR_MIN`` huge); the record batches
must be equal. Malformed batches raise the per-record decoder's error either way. The compiled
decoder is off here (tests/spark/test_native_records.py compares it with these paths).
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from clients.protocol.pulsar_api_pb2 import MessageMetadata, SingleMessageMetadata
from spark_connector import entries, native_records, scanned_rows
from spark_connector.batch_records import scan_batch
from spark_connector.positions import EARLIEST, LATEST, Pos

TOPIC = "persistent://public/default/t-partition-2"


@pytest.fixture(autouse=True)
def python_decoder_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_records, "EXT", None)


def _record(rnd: random.Random, i: int) -> tuple[SingleMessageMetadata, bytes]:
    size = rnd.choice([0, 1, 3, 100, 200, 5000])
    if rnd.random() < 0.03:  # looks like record starts: zero sizes followed by first tags
        payload = bytes(rnd.choice([0, 0, 0, 0x12, 0x18, 0x0A, 5]) for _ in range(min(size, 64)))
    else:
        payload = rnd.randbytes(size)
    m = SingleMessageMetadata(payload_size=len(payload))
    if rnd.random() < 0.7:
        m.partition_key = rnd.choice(["k", "", "ключ", "x" * 200, str(i)])
    if rnd.random() < 0.3:
        for j in range(rnd.choice([1, 2, 3])):
            m.properties.add(key=f"p{j}", value=rnd.choice(["", "v", "w" * 150]))
    if rnd.random() < 0.4:
        m.event_time = rnd.choice([1, 127, 128, 1_700_000_000_123])
    if rnd.random() < 0.6:
        m.sequence_id = rnd.choice([0, 5, 300, 70_000, 2**40])
    if rnd.random() < 0.1:
        m.ordering_key = b"ok"
    if rnd.random() < 0.05:
        m.compacted_out = True
    if rnd.random() < 0.05:
        m.null_value = True
    return m, payload


def _batch(records: list[tuple[SingleMessageMetadata, bytes]]) -> bytes:
    return b"".join(struct.pack(">I", m.ByteSize()) + m.SerializeToString() + p for m, p in records)


def _decode(items: list[tuple[int, int, MessageMetadata, bytes]], vector_min: int, start: Pos, end: Pos,
            monkeypatch: pytest.MonkeyPatch, scanned: list[bool] | None = None) -> pa.Table:
    monkeypatch.setattr(entries, "VECTOR_MIN", vector_min)
    if scanned is not None:
        def counted(buf: bytes, n: int, size: int | None = None) -> object:
            got = scan_batch(buf, n, size)
            scanned.append(got is not None)
            return got
        monkeypatch.setattr(scanned_rows, "scan_batch", counted)
    d = entries.EntryDecoder(TOPIC, 2, start, end)
    return pa.Table.from_batches(list(d.batches(iter(items), 50)), schema=d.arrow_schema)


@pytest.mark.parametrize("seed", range(6))
def test_scan_rows_equal_record_by_record_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    items = []
    for entry in range(12):
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1_700_000_000_000 + entry)
        if rnd.random() < 0.2:  # a single message between batches
            meta.partition_key = "single"
            items.append((7, entry, meta, b"one"))
            continue
        n = rnd.choice([1, 2, 40, 300])
        meta.num_messages_in_batch = n
        items.append((7, entry, meta, _batch([_record(rnd, i) for i in range(n)])))
    used: list[bool] = []
    for start, end in [(EARLIEST, LATEST), (Pos(7, 2, 17), Pos(7, 9, 5)), (Pos(7, 3), Pos(7, 3, 1))]:
        by_record = _decode(items, 1 << 40, start, end, monkeypatch)
        scanned = _decode(items, 1, start, end, monkeypatch, used)
        assert scanned.num_rows == by_record.num_rows
        assert scanned.equals(by_record), (seed, start, end)
    assert sum(used) >= len(used) // 2, used  # most batches take the scan


@pytest.mark.parametrize("seed", range(3))
def test_runs_of_small_batches_equal_record_by_record_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches are scanned together once their run holds VECTOR_MIN records (a shorter run,
    cut by a single message or the record batch's end, goes record by record): same rows, same order."""
    rnd = random.Random(100 + seed)
    items = []
    for entry in range(80):
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1_700_000_000_000 + entry)
        if rnd.random() < 0.1:
            meta.partition_key = "single"
            items.append((7, entry, meta, b"one%d" % entry))
            continue
        n = rnd.choice([1, 2, 3, 5, 8])
        meta.num_messages_in_batch = n
        items.append((7, entry, meta, _batch([_record(rnd, i) for i in range(n)])))
    used: list[bool] = []
    for start, end in [(EARLIEST, LATEST), (Pos(7, 2, 1), Pos(7, 60, 2))]:
        by_record = _decode(items, 1 << 40, start, end, monkeypatch)
        runs = _decode(items, 32, start, end, monkeypatch, used)
        assert runs.equals(by_record), (seed, start, end)
    assert any(used), used  # some runs took the scan


@pytest.mark.parametrize("vector_min", [1, 1 << 40])
def test_rows_without_properties_have_empty_maps(vector_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record batches where no row has properties share one zero offsets buffer (of the longest
    batch yet): every map is empty, not null, at any batch length, and a batch with properties
    after them still gets its own offsets."""
    items, want = [], []
    for entry, (n, with_props) in enumerate([(30, False), (120, False), (7, False), (40, True), (60, False)]):
        records = []
        for i in range(n):
            m = SingleMessageMetadata(payload_size=3, partition_key=str(i))
            if with_props and i % 3 == 0:
                m.properties.add(key="k", value=str(i))
            records.append((m, b"abc"))
            want.append([("k", str(i))] if with_props and i % 3 == 0 else [])
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1_700_000_000_000,
                               num_messages_in_batch=n)
        items.append((7, entry, meta, _batch(records)))
    got = _decode(items, vector_min, EARLIEST, LATEST, monkeypatch)
    props = got.column("__messageProperties")
    assert props.null_count == 0 and props.to_pylist() == want


def test_the_scan_covers_the_usual_batches() -> None:
    rnd = random.Random(3)
    records = [_record(rnd, i) for i in range(200)]
    scanned = scan_batch(_batch(records), len(records))
    assert scanned is not None
    assert scanned.value_size.tolist() == [len(p) for _, p in records]
    assert scanned.key_size.tolist() == [len(m.partition_key.encode()) if m.HasField("partition_key") else -1
                                         for m, _ in records]
    assert scanned.event_time.tolist() == [m.event_time for m, _ in records]
    assert scanned.compacted.tolist() == [m.compacted_out for m, _ in records]


@pytest.mark.parametrize("damage", ["truncated", "size_past_end"])
def test_malformed_batches_fall_back_to_the_clear_error(damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(11)
    records = [_record(rnd, i) for i in range(60)]
    body = _batch(records)
    if damage == "truncated":
        body = body[:-10]
    else:
        body += struct.pack(">I", 3) + b"\x18\x7f\x40" + b"short"
        records.append(records[0])
    assert scan_batch(body, len(records)) is None
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=len(records))
    for vector_min in (1, 1 << 40):
        with pytest.raises(ValueError, match="batch record 60 of 61|batch record 59 of 60"):
            _decode([(7, 0, meta, body)], vector_min, EARLIEST, LATEST, monkeypatch)


def test_a_wire_type_the_scan_does_not_know_goes_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(12)
    records = [_record(rnd, i) for i in range(60)]
    raw = b"\x18\x02\x21" + bytes(8)  # payload_size 2, then field 4 as fixed64: protobuf skips it
    body = _batch(records) + struct.pack(">I", len(raw)) + raw + b"ab"
    assert scan_batch(body, 61) is None
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=61)
    rows = _decode([(7, 0, meta, body)], 1, EARLIEST, LATEST, monkeypatch)
    assert rows.equals(_decode([(7, 0, meta, body)], 1 << 40, EARLIEST, LATEST, monkeypatch))
    assert rows.column("value")[-1].as_py() == b"ab"


def test_message_ids_of_whole_batches_match_the_consumers_bytes() -> None:
    from spark_connector.rows import message_id
    from spark_connector.scanned_rows import message_ids

    for n in (1, 127, 128, 129, 16384, 16385):
        # the last two prefixes have one length: each entry's ids start from a clean layout
        for partition, ledger, entry in ((-1, 0, 0), (3, 2**40, 130), (3, 2**40, 131)):
            prefix = entries.EntryDecoder(TOPIC, partition, EARLIEST, LATEST)._prefix(ledger, entry)
            data, sizes = message_ids(prefix, n, None)
            ends = sizes.cumsum()
            assert ends[-1] == len(data)
            for i in range(n):
                got = bytes(data[ends[i] - sizes[i]:ends[i]])
                assert got == message_id(partition, ledger, entry, i, n).serialize(), (n, i)


def test_record_batches_end_at_a_byte_budget_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries, "BATCH_BYTES", 50_000)
    rnd = random.Random(5)
    items = []
    for entry in range(6):  # 40 records of 1000 bytes an entry: 40 KB
        meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1, num_messages_in_batch=40)
        body = _batch([(SingleMessageMetadata(payload_size=1000), rnd.randbytes(1000)) for _ in range(40)])
        items.append((7, entry, meta, body))
    d = entries.EntryDecoder(TOPIC, 2, EARLIEST, LATEST)
    sizes = [b.num_rows for b in d.batches(iter(items), 1 << 20)]
    assert sizes == [80, 80, 80]  # a batch ends at the entry that reaches 50 KB, not at 1M rows
