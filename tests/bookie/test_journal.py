"""Journal tests: record format, group commit, rolling, replay with a torn tail and a bit flip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie import journal_format as jf
from bookie.errors import FormatError, JournalError
from bookie.journal import Journal, list_journal_ids, replay_records, trim_preallocated
from bookie.log_mark import LogMark
from bookie.metrics import BookieMetrics
from tests.bookie.helpers import entry, make_config


def _payload(ledger: int, eid: int, size: int = 100) -> bytes:
    return entry(ledger, eid, bytes([eid % 256]) * size)


def test_record_round_trip_and_meta_records() -> None:
    image = bytearray(jf.encode_header(7))
    payloads = [_payload(1, 0), jf.master_key_payload(1, b"key"), jf.fence_payload(1), jf.explicit_lac_payload(1, 5, b"L")]
    for p in payloads:
        image += jf.encode_record(p)
    assert jf.decode_header(image) == 7
    result = jf.ScanResult(0, "")
    recs = list(jf.scan(image, jf.HEADER_SIZE, result))
    assert [r.payload for r in recs] == payloads
    assert result.reason == "eof" and result.end_offset == len(image)
    assert recs[1].entry_id == jf.ENTRY_ID_MASTER_KEY and recs[1].body == b"key"
    assert recs[2].entry_id == jf.ENTRY_ID_FENCE
    assert recs[3].explicit_lac() == (5, b"L")
    with pytest.raises(FormatError):
        jf.decode_header(b"XXXX" + bytes(600))


def test_scan_stops_at_zeros_torn_tail_and_bit_flip() -> None:
    recs = [jf.encode_record(_payload(1, i)) for i in range(10)]
    good = jf.encode_header(1) + b"".join(recs)
    # preallocated zeros after the data
    res = jf.ScanResult(0, "")
    assert len(list(jf.scan(good + bytes(4096), jf.HEADER_SIZE, res))) == 10 and res.reason == "zeros"
    # torn tail: half of record 9 reached the disk
    torn = good[: len(good) - len(recs[9]) // 2]
    res = jf.ScanResult(0, "")
    assert len(list(jf.scan(torn, jf.HEADER_SIZE, res))) == 9 and res.reason == "torn"
    # bit flip inside record 6: replay stops before it, never returns it
    flipped = bytearray(good)
    pos = jf.HEADER_SIZE + sum(map(len, recs[:6])) + 40
    flipped[pos] ^= 0x01
    res = jf.ScanResult(0, "")
    out = list(jf.scan(flipped, jf.HEADER_SIZE, res))
    assert [r.entry_id for r in out] == list(range(6)) and res.reason == "corrupt"


async def test_group_commit_acks_after_fsync_in_groups(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_max_group_wait_ms=5)
    j = Journal(cfg, BookieMetrics())
    first = j.open_new_file()
    # the file is preallocated (journal_pre_alloc_size_mb) so group syncs carry no allocation
    assert os.stat(j.current_dir / jf.file_name(first.file_id)).st_size >= cfg.journal_pre_alloc_size_mb << 20
    acked: list[int] = []
    n = 500
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(n):
            j.append(_payload(1, i), lambda err, i=i: acked.append(i) if err is None else None)
        assert acked == []  # nothing is acknowledged before its group is fsynced
        with trio.fail_after(10):
            while len(acked) < n:
                await trio.sleep(0.005)
        nursery.cancel_scope.cancel()
    assert acked == list(range(n))  # callbacks in append order
    groups = j.metrics.journal_group_entries.collect()[0].samples
    count = next(s.value for s in groups if s.name.endswith("_count"))
    assert count < n / 10  # grouped, not one fsync per record
    j.close()
    # everything acked is in the file
    recs = list(replay_records(j.current_dir, LogMark()))
    assert [r.entry_id for r in recs] == list(range(n))


async def test_a_groups_kept_byte_count_is_what_its_write_takes(tmp_path: Path, monkeypatch) -> None:
    """The group's ``_pending_bytes`` goes to the write as its size (no recount per group): it
    must be the bytes of its buffers for every payload type, or a short write would go unseen."""
    cfg = make_config(tmp_path, journal_max_group_wait_ms=2)
    j = Journal(cfg, BookieMetrics())
    j.open_new_file()
    sizes: list[tuple[int, int]] = []
    real = Journal._write_group

    def write_group(self, bufs, sync, size):  # type: ignore[no-untyped-def]
        sizes.append((size, sum(len(memoryview(b).cast("B")) for b in bufs)))
        return real(self, bufs, sync, size)

    monkeypatch.setattr(Journal, "_write_group", write_group)
    kinds = [bytes, bytearray, memoryview]
    acked: list[int] = []
    n = 60
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(n):
            j.append(kinds[i % 3](_payload(1, i, size=1 + 37 * i)), lambda err, i=i: acked.append(i) if err is None else None)
            if i % 7 == 0:
                await trio.sleep(0.003)  # groups of several sizes
        with trio.fail_after(10):
            while len(acked) < n:
                await trio.sleep(0.005)
        nursery.cancel_scope.cancel()
    j.close()
    assert sizes and all(kept == real_bytes for kept, real_bytes in sizes)
    assert [r.entry_id for r in replay_records(j.current_dir, LogMark())] == list(range(n))


async def test_a_group_that_filled_up_does_not_cut_the_next_groups_wait_short(tmp_path: Path) -> None:
    """A group written for reaching the byte threshold had set ``_full``; the next group must
    still wait its journal_max_group_wait_ms (a stale set event would write it at once).
    _take_group replaces set events only after a set() flagged them (no is_set() per group)."""
    cfg = make_config(tmp_path, journal_flush_when_queue_empty=False, journal_max_group_wait_ms=5000,
                      journal_buffered_writes_threshold=4096)
    j = Journal(cfg, BookieMetrics())
    j.open_new_file()
    acked: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(3):  # over the threshold: written without waiting
            j.append(_payload(1, i, size=2000), lambda err, i=i: acked.append(i) if err is None else None)
        with trio.fail_after(10):
            while len(acked) < 3:
                await trio.sleep(0.005)
        j.append(_payload(1, 3), lambda err: acked.append(3) if err is None else None)
        await trio.sleep(0.2)  # far below the 5 s group wait
        assert acked == [0, 1, 2]
        nursery.cancel_scope.cancel()
    j.close()
    assert [r.entry_id for r in replay_records(j.current_dir, LogMark())] == [0, 1, 2, 3]  # flushed at close


async def test_rolls_to_new_file_and_new_file_per_start(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_max_size_mb=1, journal_flush_when_queue_empty=True)
    j = Journal(cfg, BookieMetrics())
    first = j.open_new_file()
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(40):
            await j.append_and_wait(_payload(1, i, 60_000))
        nursery.cancel_scope.cancel()
    j.close()
    ids = list_journal_ids(j.current_dir)
    assert len(ids) >= 2 and ids[0] == first.file_id
    recs = list(replay_records(j.current_dir, first))
    assert [r.entry_id for r in recs] == list(range(40))
    j2 = Journal(cfg, BookieMetrics())
    assert j2.open_new_file().file_id == ids[-1] + 1
    j2.close()
    # gc keeps journal_max_backups files behind the mark
    deleted = j2.gc_journals(LogMark(ids[-1] + 1, jf.HEADER_SIZE))
    assert len(list_journal_ids(j.current_dir)) == min(cfg.journal_max_backups, len(ids)) + 1
    assert all(d < ids[-1] + 1 for d in deleted)


async def test_replay_from_mark_and_missing_journal(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_flush_when_queue_empty=True)
    j = Journal(cfg, BookieMetrics())
    j.open_new_file()
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(5):
            await j.append_and_wait(_payload(3, i))
        mid = j.durable_mark
        for i in range(5, 8):
            await j.append_and_wait(_payload(3, i))
        nursery.cancel_scope.cancel()
    j.close()
    assert [r.entry_id for r in replay_records(j.current_dir, mid)] == [5, 6, 7]
    with pytest.raises(JournalError):
        list(replay_records(j.current_dir, LogMark(mid.file_id + 5, 512)))


async def test_replay_truncates_torn_and_corrupt_tail_on_disk(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_flush_when_queue_empty=True)
    j = Journal(cfg, BookieMetrics())
    start = j.open_new_file()
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(10):
            await j.append_and_wait(_payload(4, i))
        nursery.cancel_scope.cancel()
    j.close()
    path = j.current_dir / jf.file_name(start.file_id)
    rec_len = len(jf.encode_record(_payload(4, 0)))
    # simulate a torn write of a next record (garbage length + partial data), then a bit flip in record 7
    with open(path, "r+b") as f:
        f.seek(jf.HEADER_SIZE + 10 * rec_len)
        f.write(b"\x00\x00\x01\x00garbage")
        f.seek(jf.HEADER_SIZE + 7 * rec_len + 50)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x80]))
    assert [r.entry_id for r in replay_records(j.current_dir, start)] == list(range(7))


def test_last_mark_max_over_dirs_and_corrupt_file_ignored(tmp_path: Path) -> None:
    from bookie import log_mark

    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    assert log_mark.read_mark(dirs) == LogMark()
    log_mark.write_mark(dirs, LogMark(3, 1000))
    log_mark.write_mark(dirs[:1], LogMark(4, 600))
    assert log_mark.read_mark(dirs) == LogMark(4, 600)
    (dirs[0] / log_mark.FILE_NAME).write_bytes(b"\x00" * 20)  # bad checksum: ignored
    assert log_mark.read_mark(dirs) == LogMark(3, 1000)


def test_trim_preallocated_gives_back_zeros_and_keeps_records(tmp_path: Path) -> None:
    """Journals left preallocated (a crash, an older version) are cut at their last record;
    a record ending in zero bytes stays whole; a tail that is not all zeros is left alone."""
    cur = tmp_path / "current"
    cur.mkdir()
    payloads = [(1).to_bytes(8, "big") + i.to_bytes(8, "big") + b"p" * 100 + b"\0" * 50 for i in range(3)]
    body = jf.encode_header(1) + b"".join(jf.encode_record(p) for p in payloads)
    (cur / jf.file_name(1)).write_bytes(body + b"\0" * (jf.HEADER_SIZE + (1 << 20) - len(body)))
    garbage = jf.encode_header(2) + jf.encode_record(payloads[0])
    (cur / jf.file_name(2)).write_bytes(garbage + b"\x07" + b"\0" * (jf.HEADER_SIZE + (1 << 20) - len(garbage) - 1))
    (cur / jf.file_name(3)).write_bytes(jf.encode_header(3) + jf.encode_record(payloads[1]))  # already trimmed
    freed = trim_preallocated(cur, 1 << 62)
    assert (cur / jf.file_name(1)).stat().st_size == len(body)
    assert freed == jf.HEADER_SIZE + (1 << 20) - len(body)
    assert (cur / jf.file_name(2)).stat().st_size == jf.HEADER_SIZE + (1 << 20)
    assert [bytes(r.payload) for r in replay_records(cur, LogMark(1, jf.HEADER_SIZE)) if r.entry_id >= 0][:3] == payloads


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=60)), max_size=8),
       st.integers(-(2**63), 2**63 - 1))
def test_fuzz_records_round_trip(recs: list[tuple[int, int, bytes]], lac: int) -> None:
    """Every record layout (data, explicit LAC, no-op) scans back to what was written; the
    prefix the journal writes before each payload is the format's own record framing."""
    payloads = [jf.explicit_lac_payload(lid, lac, body) if eid < 0 else lid.to_bytes(8, "big") + eid.to_bytes(8, "big") + body
                for lid, eid, body in recs] + [jf.NOOP_PAYLOAD]
    image = jf.encode_header(1) + b"".join(jf.record_prefix(p) + p for p in payloads)
    assert image == jf.encode_header(1) + b"".join(jf.encode_record(p) for p in payloads)
    out = list(jf.scan(image, jf.HEADER_SIZE))
    assert [r.payload for r in out] == payloads
    for (lid, eid, body), r in zip(recs, out):
        assert r.ledger_id == lid
        if eid < 0:
            assert r.entry_id == jf.ENTRY_ID_EXPLICIT_LAC and r.explicit_lac() == (lac, body)
    assert (out[-1].ledger_id, out[-1].entry_id) == (0, jf.ENTRY_ID_NOOP)


def test_record_prefix_length_crc_cache_stays_correct_when_full() -> None:
    """More distinct sizes than the length-CRC cache holds: every prefix still verifies."""
    payloads = [bytes(16 + n) for n in range(5000)]
    image = jf.encode_header(1) + b"".join(jf.record_prefix(p) + p for p in payloads)
    assert len(list(jf.scan(image, jf.HEADER_SIZE))) == len(payloads)


async def test_a_readers_input_batch_writes_its_group_at_the_batch_end(tmp_path: Path) -> None:
    """Appends inside a quire.input_batch (a broker reader's run of SENDs) are one group,
    written and acknowledged durably by input_batch.end() in the same task step; outside a
    batch the writer task does it as before."""
    from quire import input_batch

    j = Journal(make_config(tmp_path), BookieMetrics())
    first = j.open_new_file()
    durable: list[tuple[list, BaseException | None]] = []
    j.on_durable = lambda tokens, err: durable.append((list(tokens), err))
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        await trio.testing.wait_all_tasks_blocked()  # the writer task waits for records
        input_batch.begin()
        try:
            for i in range(3):
                j.append_ack(_payload(1, i), i)
            assert durable == []  # not durable yet: nothing acknowledged
        finally:
            input_batch.end()
        # no checkpoint since: written, synced and acknowledged by end() itself, as one group
        assert durable == [([0, 1, 2], None)]
        assert j.durable_mark > first
        records = [r.entry_id for r in replay_records(j.current_dir, first)]
        assert records == [0, 1, 2]
        # outside a batch: the writer task writes it
        j.append_ack(_payload(1, 3), 3)
        assert len(durable) == 1
        with trio.fail_after(10):
            while len(durable) < 2:
                await trio.sleep(0.001)
        assert durable[1] == ([3], None)
        nursery.cancel_scope.cancel()
    groups = j.metrics.journal_group_entries.collect()[0].samples
    assert next(s.value for s in groups if s.name.endswith("_count")) == 2


async def test_an_input_batch_leaves_a_group_for_the_thread_to_the_writer_task(tmp_path: Path) -> None:
    """A batch's group that the writer task would hand to its thread (durable writes slow
    now) is not written by end(): the writer task is woken for it and the loop goes on."""
    from quire import input_batch

    j = Journal(make_config(tmp_path), BookieMetrics())
    first = j.open_new_file()
    durable: list[list] = []
    j.on_durable = lambda tokens, err: durable.append(list(tokens))
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        await trio.testing.wait_all_tasks_blocked()
        j._sync_ewma = 1.0  # recent durable writes took 1 s: not written on the event loop
        input_batch.begin()
        j.append_ack(_payload(1, 0), 0)
        input_batch.end()
        assert durable == []
        with trio.fail_after(10):
            while not durable:
                await trio.sleep(0.001)
        assert durable == [[0]]
        nursery.cancel_scope.cancel()
    assert [r.entry_id for r in replay_records(j.current_dir, first)] == [0]


async def test_the_durable_write_time_leaves_out_the_hop_back_from_the_writer_thread(tmp_path: Path) -> None:
    """``bookie_journal_sync_seconds`` and the average that decides between writing on the event
    loop and in the thread time the write + sync alone: a slow way back from the thread (a busy
    event loop, the GIL) is not the disk's, and counted in it kept the journal in its thread
    mode under load."""
    hop_s = 0.1
    j = Journal(make_config(tmp_path), BookieMetrics())
    j.open_new_file()
    to_thread = j._writer.run

    async def slow_way_back(fn, *args):  # type: ignore[no-untyped-def]
        mark = await to_thread(fn, *args)
        await trio.sleep(hop_s)  # the writer task gets the loop back late
        return mark

    j._writer.run = slow_way_back  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(3):  # groups over the inline size: each goes through the thread
            await j.append_and_wait(_payload(1, i, size=20 * 1024))
        nursery.cancel_scope.cancel()
    samples = {s.name: s.value for s in j.metrics.journal_sync_seconds.collect()[0].samples}
    assert samples["bookie_journal_sync_seconds_count"] == 3
    assert samples["bookie_journal_sync_seconds_sum"] < 3 * hop_s
    assert j._sync_ewma < hop_s


async def test_pages_are_dropped_from_the_cache_8mb_behind_in_steps_not_per_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """journal_remove_pages_from_cache as BookKeeper: the last 8 MB stay cached; older pages
    are dropped in 1 MB steps, not by one fadvise per group (a system call per unbatched add)."""
    from bookie import journal as journal_module

    drops: list[tuple[int, int]] = []
    monkeypatch.setattr(journal_module.os, "posix_fadvise", lambda fd, off, n, advice: drops.append((off, n)))
    cfg = make_config(tmp_path, journal_flush_when_queue_empty=True)
    j = Journal(cfg, BookieMetrics())
    j.open_new_file()
    async with trio.open_nursery() as nursery:
        await nursery.start(j.run)
        for i in range(200):  # 200 small groups, far less than 8 MB
            await j.append_and_wait(_payload(1, i))
        assert drops == []
        for i in range(200, 240):  # 40 groups of 256 KiB: 10 MB
            await j.append_and_wait(_payload(1, i, 256 * 1024))
        nursery.cancel_scope.cancel()
    position = j.durable_mark.offset
    j.close()
    assert 1 <= len(drops) <= 3
    assert drops[0][0] == 0 and all(a[0] + a[1] == b[0] for a, b in zip(drops, drops[1:]))  # contiguous
    dropped_to = drops[-1][0] + drops[-1][1]
    assert position - 9 * 2**20 < dropped_to <= position - 8 * 2**20
    assert [r.entry_id for r in replay_records(j.current_dir, LogMark())] == list(range(240))
