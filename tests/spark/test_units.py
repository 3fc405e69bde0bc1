"""Pure parts of the Spark connector: positions, planning arithmetic, option checks, id encoding."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from spark_connector.errors import PulsarDataLossError, PulsarOptionError
from spark_connector.options import parse_options
from spark_connector.planner import PartitionInfo, advance, check_data_loss, entries_between, split_ranges
from spark_connector.positions import EARLIEST, LATEST, Pos, after, position_from_json
from spark_connector.rows import message_id, topic_column

BASE = {"service.url": "pulsar://h:6650", "admin.url": "http://h:8080"}
INFO = PartitionInfo("t", ((3, 10, 1000), (5, 0, 0), (7, 20, 2000), (9, 5, 500)), Pos(9, 5))


def test_positions_order_and_parse() -> None:
    assert Pos.parse("3:4") == Pos(3, 4) and str(Pos(3, 4, 2)) == "3:4:2"
    assert EARLIEST < Pos(0, 0) < after(Pos(3, 9)) < Pos(4, 0) < LATEST
    assert position_from_json(-2) == EARLIEST and position_from_json(-1) == LATEST
    assert position_from_json({"ledgerId": 3, "entryId": 4}) == Pos(3, 4)
    ser = list(message_id(1, 3, 4, 2, 10).serialize())
    assert position_from_json(ser) == Pos(3, 4, 2)


def test_topic_column_is_the_repeated_name_at_any_length() -> None:
    import pyarrow as pa

    topic = "persistent://public/default/t\u00e9-partition-3"  # not ASCII: bytes, not characters, per row
    for n in (3, 0, 70_000, 10, 70_000, 70_001):  # grows, shrinks to a slice, grows again
        col = topic_column(topic, n)
        assert col.type == pa.string() and col.equals(pa.repeat(pa.scalar(topic, pa.string()), n))
    other = topic_column("persistent://public/default/u", 4)
    assert other.to_pylist() == ["persistent://public/default/u"] * 4
    # a slice ships only its rows (the IPC writer cuts the shared buffer)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, pa.schema([("t", pa.string())])) as w:
        w.write_batch(pa.record_batch([topic_column(topic, 5)], names=["t"]))
    got = pa.ipc.open_stream(sink.getvalue()).read_all()
    assert got.column(0).to_pylist() == [topic] * 5 and sink.getvalue().size < 2000


def test_entries_between_advance_and_split() -> None:
    assert entries_between(INFO, EARLIEST, Pos(9, 5)) == 35
    assert entries_between(INFO, Pos(3, 5), Pos(7, 3)) == 8
    assert advance(INFO, Pos(3, 5), 8, Pos(9, 5)) == Pos(7, 3)
    assert advance(INFO, EARLIEST, 100, Pos(9, 5)) == Pos(9, 5)
    pieces = split_ranges(INFO, EARLIEST, Pos(9, 5), 10)
    assert pieces == [(EARLIEST, Pos(3, 10)), (Pos(3, 10), Pos(7, 20)), (Pos(7, 20), Pos(9, 5))]
    assert split_ranges(INFO, Pos(9, 5), Pos(9, 5), 10) == []
    # 100 bytes an entry: 1000 bytes cut after every ledger of 10 entries or more
    assert split_ranges(INFO, EARLIEST, Pos(9, 5), 1000, 1000) == pieces
    assert split_ranges(INFO, EARLIEST, Pos(9, 5), 1000, 2500) == [(EARLIEST, Pos(7, 20)), (Pos(7, 20), Pos(9, 5))]
    assert sum(entries_between(INFO, lo, hi) for lo, hi in pieces) == 35


def test_data_loss_detection() -> None:
    assert check_data_loss(INFO, Pos(3, 2), True) == Pos(3, 2)
    with pytest.raises(PulsarDataLossError):
        check_data_loss(INFO, Pos(1, 0), True)
    assert check_data_loss(INFO, Pos(1, 0), False) == Pos(3, 0)


def test_entry_decoder_ids_match_serialize() -> None:
    from spark_connector.entries import EntryDecoder, _suffixes

    rnd = random.Random(7)
    for _ in range(3000):
        part, ledger, entry = rnd.choice([-1, 0, 3, 300]), rnd.choice([0, 5, 2**40]), rnd.choice([0, 127, 128, 99999])
        prefix = EntryDecoder("t", part, EARLIEST, LATEST)._prefix(ledger, entry)
        assert prefix == message_id(part, ledger, entry, -1, 0).serialize()
        n = rnd.choice([1, 2, 200, 1000])
        i = rnd.randrange(n)
        assert prefix + _suffixes(n)[i] == message_id(part, ledger, entry, i, n).serialize()


def test_entry_decoder_reads_batch_records_as_protobuf_does() -> None:
    import struct

    from clients.protocol.pulsar_api_pb2 import MessageMetadata, SingleMessageMetadata

    from spark_connector.entries import EntryDecoder

    records = [SingleMessageMetadata(payload_size=3, sequence_id=9),
               SingleMessageMetadata(payload_size=3, partition_key="k\u00e9y", event_time=1_700_000_000_123,
                                     properties=[{"key": "a", "value": "1"}, {"key": "b", "value": ""}]),
               SingleMessageMetadata(payload_size=3, ordering_key=b"o", partition_key="x"),  # the protobuf path
               SingleMessageMetadata(payload_size=3, compacted_out=True),
               SingleMessageMetadata(payload_size=3, sequence_id=300)]
    body = b"".join(struct.pack(">I", m.ByteSize()) + m.SerializeToString() + b"v%02d" % i
                    for i, m in enumerate(records))
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1_700_000_000_000,
                           num_messages_in_batch=len(records))
    d = EntryDecoder("persistent://public/default/t-partition-1", 1, Pos(4, 2, 1), Pos(4, 3))
    d.add_entry(4, 1, meta, body)  # before start
    d.add_entry(4, 2, meta, body)
    rows = d.flush().to_pylist()
    assert [r["value"] for r in rows] == [b"v01", b"v02", b"v04"]  # from batch index 1; 3 compacted out
    assert [r["__key"] for r in rows] == ["k\u00e9y", "x", None]
    assert rows[0]["__messageProperties"] == [("a", "1"), ("b", "")] and rows[1]["__messageProperties"] == []
    assert int(rows[0]["__eventTime"].timestamp() * 1000) == 1_700_000_000_123 and rows[1]["__eventTime"] is None
    assert rows[2]["__messageId"] == message_id(1, 4, 2, 4, 5).serialize()
    d.add_entry(4, 3, meta, body)
    assert d.done and len(d) == 0


@pytest.mark.parametrize("extra,named", [
    ({"topic": "a", "endingOffsets": '{"a": -2}'}, "endingOffsets"),
    ({"topic": "a", "subscriptionPrefix": "x", "predefinedSubscription": "y"}, "predefinedSubscription"),
    ({"topic": "a", "maxEntriesPerTrigger": "0"}, "maxEntriesPerTrigger"),
    ({"topic": "a", "pollTimeoutMs": "x"}, "pollTimeoutMs"),
    ({"topic": "a", "service.url": "http://x"}, "service.url"),
])
def test_streaming_option_errors(extra: dict[str, str], named: str) -> None:
    with pytest.raises(PulsarOptionError, match=f"'{named}'"):
        parse_options({**BASE, **{k.lower(): v for k, v in extra.items()}}, purpose="read", streaming=True)


def test_defaults() -> None:
    batch = parse_options({**BASE, "topic": "a"}, purpose="read")
    stream = parse_options({**BASE, "topic": "a"}, purpose="read", streaming=True)
    assert batch.starting_offsets == "earliest" and stream.starting_offsets == "latest"
    assert batch.fail_on_data_loss is True and batch.read_mode == "broker"
    assert parse_options({"service.url": "pulsar://h:1", "topic": "t", "checkpointlocation": "/x"},
                         purpose="write").topic == "t"


def test_read_limits_become_entry_budgets() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

    from spark_connector.stream import PulsarStreamReader

    reader = PulsarStreamReader(parse_options({**BASE, "topic": "a", "maxbytespertrigger": "1000"},
                                              purpose="read", streaming=True))
    assert isinstance(reader.getDefaultReadLimit(), ReadMaxBytes)
    reader._infos = {"t": INFO, "u": INFO}  # 35 entries, 3500 bytes: 100 bytes an entry
    backlog = {"t": (EARLIEST, Pos(9, 5)), "u": (EARLIEST, Pos(9, 5))}
    assert reader._entry_budget(ReadMaxBytes(1000), backlog) == {"t": 5, "u": 5}
    assert reader._entry_budget(ReadMaxRows(9), backlog) == {"t": 4, "u": 4}
    assert reader._entry_budget(ReadAllAvailable(), backlog) is None


def test_passthrough_options_become_client_kwargs() -> None:
    from clients.options import CompressionType

    read = parse_options({**BASE, "topic": "a", "pulsar.client.operationtimeoutms": "2500",
                          "pulsar.reader.receiverqueuesize": "77"}, purpose="read")
    assert read.client_conf == {"operation_timeout_seconds": 3} and read.reader_conf == {"receiver_queue_size": 77}
    write = parse_options({"service.url": "pulsar://h:1", "topic": "t", "pulsar.producer.batchingmaxmessages": "10",
                           "pulsar.producer.compressiontype": "zstd",
                           "pulsar.producer.batchingmaxpublishdelaymicros": "3000"}, purpose="write")
    assert write.producer_conf == {"batching_max_messages": 10, "compression_type": CompressionType.ZSTD,
                                   "batching_max_publish_delay_ms": 3}


@pytest.mark.parametrize("extra,purpose,named,why", [
    ({"pulsar.client.statsIntervalSeconds": "5"}, "read", "pulsar.client.statsintervalseconds", "not supported"),
    ({"pulsar.client.authPluginClassName": "x"}, "read", "pulsar.client.authPluginClassName", "unknown authentication plugin"),
    ({"pulsar.client.authPluginClassName": "token"}, "read", "pulsar.client.authPluginClassName", "needs a token"),
    ({"pulsar.client.authParams": "token:abc"}, "read", "pulsar.client.authParams", "needs pulsar.client.authPluginClassName"),
    ({"pulsar.client.tlsTrustCertsFilePath": "/no/ca.pem"}, "read", "pulsar.client.tlsTrustCertsFilePath", "no such file"),
    ({"pulsar.reader.receiverQueueSize": "-1"}, "read", "pulsar.reader.receiverQueueSize", "bad value"),
    ({"pulsar.reader.receiverQueueSize": "5", "readMode": "direct", "metadata.url": "zk://h:1"}, "read",
     "pulsar.reader.receiverQueueSize", "readMode=broker"),
    ({"pulsar.producer.batchingEnabled": "true"}, "read", "pulsar.producer.batchingEnabled", "only to writes"),
    ({"pulsar.producer.producerName": "me"}, "write", "pulsar.producer.producername", "cannot be set"),
    ({"pulsar.producer.compressionType": "gzip"}, "write", "pulsar.producer.compressionType", "bad value"),
    ({"pulsar.reader.readerName": "r"}, "write", "pulsar.reader.readerName", "readMode=broker"),
])
def test_passthrough_option_errors(extra: dict[str, str], purpose: str, named: str, why: str) -> None:
    with pytest.raises(PulsarOptionError, match=f"'{named}'.*{why}"):
        parse_options({**BASE, "topic": "a", **{k.lower(): v for k, v in extra.items()}}, purpose=purpose)


def test_auth_options_serve_the_client_and_the_admin_calls(tmp_path: Path) -> None:
    """StreamNative's authPluginClassName/authParams: the clients.Client ``authentication`` and the
    driver's admin credentials, in either read mode (readMode=direct plans through the admin API too)."""
    from clients.auth import AuthenticationToken
    from spark_connector.admin import AdminClient
    from tests.security.certs import CertificateAuthority

    ca = CertificateAuthority(tmp_path)
    auth = {"pulsar.client.authpluginclassname": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "pulsar.client.authparams": "token:abc", "pulsar.client.tlstrustcertsfilepath": str(ca.file)}
    for mode in ({}, {"readmode": "direct", "metadata.url": "zk://h:1"}):
        opts = parse_options({**BASE, "topic": "a", **auth, **mode}, purpose="read")
        assert isinstance(opts.client_conf["authentication"], AuthenticationToken)
        assert opts.client_conf["tls_trust_certs_file_path"] == str(ca.file)
    admin = AdminClient.for_options(parse_options({**BASE, "topic": "a", **auth}, purpose="read"))
    assert admin._http.headers() == {"Authorization": "Bearer abc"}
    assert "abc" not in repr(opts.client_conf)  # the token never shows in a repr (Spark logs plans)


def test_end_of_ledger_offsets_and_consumed_ledgers() -> None:
    assert INFO.normalize(Pos(3, 10)) == Pos(5, 0) and INFO.normalize(Pos(7, 20)) == Pos(9, 0)
    assert INFO.normalize(Pos(9, 5)) == Pos(9, 5) and INFO.normalize(Pos(3, 4)) == Pos(3, 4)
    # ledger 1 is gone: data loss, unless our subscription had acknowledged exactly up to the start
    consumed = PartitionInfo("t", INFO.ledgers, INFO.end, (("q", Pos(1, 9)), ("other", Pos(9, 4))))
    with pytest.raises(PulsarDataLossError):
        check_data_loss(consumed, Pos(1, 10), True, "other")
    assert check_data_loss(consumed, Pos(1, 10), True, "q") == Pos(3, 0)
    with pytest.raises(PulsarDataLossError):
        check_data_loss(consumed, Pos(1, 4), True, "q")


def test_admin_sessions_share_one_verifying_tls_context() -> None:
    # each query opens admin sessions on the driver: the CA bundle is loaded once per process,
    # and the shared context still verifies certificates and host names
    import ssl

    from clients.admin_http import AdminHttp

    a, b = AdminHttp("http://h:8080"), AdminHttp("https://h:8443")
    ctx_a = a.http._transport._pool._ssl_context  # type: ignore[attr-defined]
    ctx_b = b.http._transport._pool._ssl_context  # type: ignore[attr-defined]
    assert ctx_a is ctx_b and ctx_a.verify_mode == ssl.CERT_REQUIRED and ctx_a.check_hostname
    insecure = AdminHttp("https://h:8443", tls_allow_insecure_connection=True)
    assert insecure.http._transport._pool._ssl_context is not ctx_a  # type: ignore[attr-defined]


def test_small_ranges_are_packed_into_tasks() -> None:
    from spark_connector.planner import pack_ranges, range_bytes

    assert range_bytes(INFO, EARLIEST, Pos(9, 5)) == 3500 and range_bytes(INFO, Pos(7, 10), Pos(9, 0)) == 1000
    mb, many = 1 << 20, 10**9
    # four 25 MB topic-partitions: two tasks of 50 MB (one wave on two cores), not four
    assert pack_ranges([(25 * mb, 250)] * 4, 64 * mb, many) == [[0, 1], [2, 3]]
    assert pack_ranges([(25 * mb, 250)] * 4, 64 * mb, many, min_parts=4) == [[0], [1], [2], [3]]
    assert pack_ranges([(25 * mb, 250)] * 4, 64 * mb, many, min_parts=3) == [[0], [1], [2], [3]]
    assert pack_ranges([(25 * mb, 250)] * 4, 64 * mb, 600) == [[0, 1], [2, 3]]
    assert pack_ranges([(25 * mb, 250)] * 4, 64 * mb, 400) == [[0], [1], [2], [3]]  # entriesPerPartition holds
    assert pack_ranges([(80 * mb, 1), (1, 1), (2, 1), (70 * mb, 1), (3, 1)], 64 * mb, many) == [[0], [1, 2], [3], [4]]
    assert pack_ranges([(1, 1), (1, 1), (9, 1), (1, 1)], 64 * mb, many, min_parts=3) == [[0, 1], [2], [3]]
    assert pack_ranges([(1, 1)] * 2, 64 * mb, many, min_parts=3) == [[0], [1]]
    assert pack_ranges([], 64 * mb, many) == [] and pack_ranges([(0, 1)] * 3, 64 * mb, many) == [[0, 1, 2]]
    assert parse_options({**BASE, "topic": "t", "minPartitions": "8"}, purpose="read").min_partitions == 8


def test_task_trace_logs_a_line_per_task_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import pyarrow as pa

    from spark_connector.task_trace import TRACE_ENV, trace_planning, traced

    batches = [pa.RecordBatch.from_arrays([pa.array([1, 2, 3])], names=["x"]),
               pa.RecordBatch.from_arrays([pa.array([4])], names=["x"])]
    monkeypatch.delenv(TRACE_ENV, raising=False)
    assert list(traced(iter(batches), "t")) == batches and trace_planning(lambda: [1, 2]) == [1, 2]
    log = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(log))
    assert list(traced(iter(batches), "t-partition-0")) == batches
    assert list(traced(iter([]), "empty")) == []
    assert trace_planning(lambda: [1, 2]) == [1, 2]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x.get("task"), x["rows"]) for x in lines[:2]] == [("t-partition-0", 4), ("empty", 0)]
    assert lines[0]["first_batch_s"] >= 0 and lines[1]["first_batch_s"] is None
    assert lines[0]["start_at"] <= lines[0]["last_batch_at"] <= lines[0]["end_at"] and lines[0]["marks"] == []
    assert lines[2]["plan"] == 2 and lines[2]["cpu_s"] >= 0


def _fetcher(chunks: list[list[int]], started: threading.Event, fail: Exception | None = None):  # type: ignore[no-untyped-def]
    async def fetch(put, stop):  # type: ignore[no-untyped-def]
        started.set()
        for c in chunks:
            if stop.is_set():
                return
            await put(c)
        if fail is not None:
            raise fail
    return fetch


def test_a_chained_range_is_fetched_while_the_one_before_is_still_read() -> None:
    from spark_connector.pump import FetchChain, pumped

    chain = FetchChain()
    s1, s2, s3 = threading.Event(), threading.Event(), threading.Event()
    first = pumped(_fetcher([[1, 2], [3]], s1), "t1", chain=chain)
    second = pumped(_fetcher([[4], [5, 6]], s2), "t2", chain=chain)
    third = pumped(_fetcher([[7]], s3), "t3", chain=chain)
    assert s1.wait(10)  # the first range's fetcher starts when it is added
    assert next(first) == 1
    # the first is fetched and being read: the second starts before anyone reads it
    assert s2.wait(10)
    _ended("t2")  # the second has fetched all, but nobody reads it yet: the third waits
    assert not s3.is_set()
    assert list(first) == [2, 3] and next(second) == 4
    assert s3.wait(10)
    assert list(second) == [5, 6] and list(third) == [7]
    chain.close()


def _ended(name: str) -> None:
    for t in threading.enumerate():
        if t.name == name:
            t.join(10)
            assert not t.is_alive()


def test_a_chain_closed_early_stops_its_fetchers_and_an_error_starts_no_next() -> None:
    from spark_connector.pump import FetchChain, pumped

    chain = FetchChain()
    s1, s2 = threading.Event(), threading.Event()
    endless = [[i] for i in range(1000)]  # more than the queue holds: its fetcher blocks on put
    first = pumped(_fetcher(endless, s1), "t1", chain=chain)
    pumped(_fetcher([[9]], s2), "t2", chain=chain)
    assert next(first) == 0
    chain.close()  # a task abandoned mid-range: its fetcher unblocks and ends, the next never runs
    assert not s2.is_set() and not [t for t in threading.enumerate() if t.name in ("t1", "t2")]

    chain = FetchChain()
    s1, s2 = threading.Event(), threading.Event()
    failing = pumped(_fetcher([[1]], s1, fail=RuntimeError("bookie gone")), "t1", chain=chain)
    pumped(_fetcher([[2]], s2), "t2", chain=chain)
    with pytest.raises(RuntimeError, match="bookie gone"):
        list(failing)
    chain.close()
    assert not s2.is_set()


def test_packed_tasks_are_evened_out_by_cutting_a_range_at_an_entry() -> None:
    from spark_connector.planner import even_packs

    # the bench's four partitions (entries of ~1000 rows): packed whole they were 526k vs 474k rows
    parts = [(288_664, 289), (237_112, 237), (185_565, 186), (288_659, 289)]
    tasks = even_packs(parts, 2, 15)
    assert tasks == [[(0, 0, 289), (1, 0, 211)], [(1, 211, 237), (2, 0, 186), (3, 0, 289)]]
    assert [sum(k - j for _, j, k in t) for t in tasks] == [500, 501]
    # equal ranges stay whole; a cut leaving less than min_piece entries is not made
    assert even_packs([(25, 250)] * 4, 2, 8) == [[(0, 0, 250), (1, 0, 250)], [(2, 0, 250), (3, 0, 250)]]
    assert even_packs([(100, 100), (104, 104)], 2, 8) == [[(0, 0, 100)], [(1, 0, 104)]]
    assert even_packs([(60, 600), (10, 100), (10, 100)], 2, 8) == [[(0, 0, 400)], [(0, 400, 600), (1, 0, 100), (2, 0, 100)]]
    for n in (1, 2, 3, 5):  # every entry dealt exactly once, in order
        got = [p for t in even_packs(parts, n, 5) for p in t]
        assert [(i, j) for i, j, _ in got] == sorted((i, j) for i, j, _ in got)
        assert all(k > j for _, j, k in got)
        assert {i: sum(k - j for ii, j, k in got if ii == i) for i in range(4)} == {i: n for i, (_, n) in enumerate(parts)}


class _BarrierAdmin:
    """An admin client whose calls meet at a barrier: serial calls would never get past it."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=10)

    def partitions(self, topic: str) -> int:
        self.barrier.wait()
        return {"persistent://public/default/a": 2, "persistent://public/default/b": 0}[topic]

    def internal_stats(self, tp: str) -> dict:
        self.barrier.wait()
        if tp.endswith("bad"):
            raise RuntimeError(f"no stats of {tp}")
        n = int(tp[-1]) if tp[-1].isdigit() else 9
        return {"ledgers": [{"ledgerId": n, "entries": 3, "size": 30}], "cursors": {}, "lastConfirmedEntry": f"{n}:2"}


def test_planning_asks_the_admin_api_for_all_partitions_at_once_and_keeps_their_order() -> None:
    from spark_connector.planner import partition_infos, topic_partitions

    admin = _BarrierAdmin(2)  # both partition counts are asked before either is answered
    tps = topic_partitions(["persistent://public/default/a", "persistent://public/default/b"], admin)  # type: ignore[arg-type]
    assert tps == ["persistent://public/default/a-partition-0", "persistent://public/default/a-partition-1",
                   "persistent://public/default/b"]
    admin = _BarrierAdmin(3)  # the three stats calls are in flight together
    infos = partition_infos(admin, tps)  # type: ignore[arg-type]
    assert list(infos) == tps
    assert [infos[tp].end for tp in tps] == [after(Pos(0, 2)), after(Pos(1, 2)), after(Pos(9, 2))]
    assert infos[tps[1]].ledgers == ((1, 3, 30),)
    admin = _BarrierAdmin(2)
    with pytest.raises(RuntimeError, match="no stats of t-bad"):  # an error is the planner's, as before
        partition_infos(admin, ["t-bad", "t-partition-0"])  # type: ignore[arg-type]


def test_a_stream_commit_moves_every_partitions_subscription_at_once_and_only_what_moved() -> None:
    from spark_connector.stream import PulsarStreamReader

    class Admin:
        def __init__(self) -> None:
            self.barrier = threading.Barrier(3, timeout=10)  # serial resets would never pass it
            self.calls: list[tuple[str, str, int, int]] = []

        def create_subscription(self, tp: str, sub: str, ledger: int, entry: int) -> None:
            self.calls.append(("create", tp, ledger, entry))

        def reset_cursor(self, tp: str, sub: str, ledger: int, entry: int) -> None:
            self.barrier.wait()
            self.calls.append(("reset", tp, ledger, entry))

    admin = Admin()
    reader = PulsarStreamReader(parse_options({"service.url": "pulsar://127.0.0.1:1", "admin.url": "http://127.0.0.1:1",
                                               "topic": "t"}, purpose="read", streaming=True))
    reader._admin = lambda: admin  # type: ignore[method-assign]
    offsets = {f"t-partition-{i}": str(Pos(5, i)) for i in range(3)}
    reader.commit({"subscription": "s", "offsets": {**offsets, "t-partition-3": str(EARLIEST)}})
    assert sorted(c for c in admin.calls if c[0] == "reset") == [("reset", f"t-partition-{i}", 5, i) for i in range(3)]
    assert len([c for c in admin.calls if c[0] == "create"]) == 3  # each subscribed once, from the start
    admin.calls.clear()
    reader.commit({"subscription": "s", "offsets": offsets})  # nothing moved: nothing asked
    assert admin.calls == []
