"""ManagedLedger over the fake ledger client: adds, rollover, open/recovery, fencing."""

from __future__ import annotations

import trio
import trio.testing
import pytest

from managed_ledger import (
    ManagedLedgerFactory,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    Position,
)
from managed_ledger.errors import ManagedLedgerError, ManagedLedgerWriteError
from managed_ledger.formats import decode_ml_info

NAME = "t/ns/persistent/topic"


async def test_adds_in_call_order_with_many_in_flight(factory, bookies) -> None:
    bookies.add_delay = 0.001
    ml = await factory.open(NAME)
    results: dict[int, Position] = {}

    async def add(i: int) -> None:
        results[i] = await ml.add_entry(f"m{i}".encode())

    async with trio.open_nursery() as n:
        for i in range(200):
            n.start_soon(add, i)
    # task start order under trio is not call order, but data order == position order
    ordered = sorted(results.items(), key=lambda kv: kv[1])
    c = await ml.open_cursor("c", "earliest")
    entries = await c.read_entries(500)
    assert [e.data for e in entries] == [f"m{i}".encode() for i, _ in ordered]
    assert len(set(results.values())) == 200
    assert ml.number_of_entries == 200 and ml.entries_added_counter == 200


async def test_sequential_adds_get_consecutive_positions(factory) -> None:
    ml = await factory.open(NAME)
    positions = [await ml.add_entry(b"x") for _ in range(5)]
    lid = positions[0].ledger_id
    assert positions == [Position(lid, i) for i in range(5)]
    assert ml.last_confirmed_entry == positions[-1]
    assert ml.total_size == 5


async def test_rollover_by_entries_with_adds_queued_in_order(factory, bookies, config) -> None:
    bookies.add_delay = 0.001
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=10))
    c = await ml.open_cursor("c", "earliest")  # keeps the ledgers from being trimmed
    results: dict[int, Position] = {}

    async def add(i: int) -> None:
        results[i] = await ml.add_entry(f"{i}".encode())

    async with trio.open_nursery() as n:
        for i in range(35):
            n.start_soon(add, i)
            await trio.sleep(0)
    ledgers = ml.ledgers
    assert [li.entries for li in ledgers] == [10, 10, 10, 5]
    datas = [e.data for e in await c.read_entries(100)]
    assert datas == [str(i).encode() for i, _ in sorted(results.items(), key=lambda kv: kv[1])]
    assert len({p.ledger_id for p in results.values()}) == 4


async def test_rollover_by_size_and_time(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_size_per_ledger_mb=1))
    big = b"x" * (600 * 1024)
    p1 = await ml.add_entry(big)
    p2 = await ml.add_entry(big)
    p3 = await ml.add_entry(big)  # ledger 1 holds 1.2 MB: full
    assert p1.ledger_id == p2.ledger_id != p3.ledger_id
    ml2 = await factory.open(NAME + "2", config.replace(maximum_rollover_time_ms=50))
    a = await ml2.add_entry(b"a")
    await trio.sleep(0.2)  # the idle ledger is rolled by the background loop
    b = await ml2.add_entry(b"b")
    assert b.ledger_id != a.ledger_id


async def test_minimum_rollover_time_gates_rollover(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=2, minimum_rollover_time_ms=60_000))
    ps = [await ml.add_entry(b"x") for _ in range(6)]
    assert len({p.ledger_id for p in ps}) == 1


async def test_reopen_recovers_and_drops_empty_ledgers(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        for _ in range(3):
            await ml.add_entry(b"abc")
        # simulate a crash: do not close, the current ledger stays open
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f2:
        ml2 = await f2.open(NAME)
        assert [li.entries for li in ml2.ledgers][:1] == [3]
        assert ml2.number_of_entries == 3 and ml2.total_size == 9
        await ml2.close()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f3:
        ml3 = await f3.open(NAME)  # the empty ledger of the previous open is dropped
        assert [li.entries for li in ml3.ledgers] == [3, 0]
        data, _ = meta.nodes_value = meta.nodes[ml3.path]
        assert [li.entries for li in decode_ml_info(data).ledgers] == [3, 0]
        c = await ml3.open_cursor("c", "earliest")
        assert [e.data for e in await c.read_entries(10)] == [b"abc"] * 3


async def test_ledger_the_dead_owner_never_closed_is_read_in_full(meta, bookies, config, crash) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        ps = [await ml.add_entry(b"%d" % i) for i in range(5)]
        await ml.rollover()
        bookies.ledgers[ps[0].ledger_id].closed = False  # died between the list CAS and the close
        crash.kill()
    crash.restore()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)  # recovers only the last ledger: the first stays unclosed
        c = await ml.open_cursor("c", "earliest")
        # its plain-open reader sees LAC 3, the ledger list says 5 entries: all are read
        assert [e.data for e in await c.read_entries(10)] == [b"%d" % i for i in range(5)]


async def test_second_owner_fences_the_first(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f1:
        ml1 = await f1.open(NAME)
        acked = [await ml1.add_entry(f"{i}".encode()) for i in range(5)]
        async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f2:
            ml2 = await f2.open(NAME)
            with pytest.raises(ManagedLedgerFencedError):
                await ml1.add_entry(b"late")
            with pytest.raises(ManagedLedgerFencedError):
                await ml1.add_entry(b"later")
            assert ml1.is_fenced
            c = await ml2.open_cursor("c", "earliest")
            assert [e.position for e in await c.read_entries(10)] == acked
            assert (await ml2.add_entry(b"new")).ledger_id > acked[-1].ledger_id


async def test_metadata_conflict_at_rollover_fences(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f1:
        ml1 = await f1.open(NAME, config.replace(max_entries_per_ledger=2))
        await ml1.add_entry(b"a")
        await ml1.add_entry(b"b")
        value, version = meta.nodes[ml1.path]
        meta.nodes[ml1.path] = (value, version + 1)  # someone else wrote the list
        with pytest.raises(ManagedLedgerFencedError):
            await ml1.add_entry(b"c")  # needs a rollover -> CAS fails
        with pytest.raises(ManagedLedgerFencedError):
            await ml1.add_entry(b"d")


async def test_write_failure_rolls_over(factory, bookies) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("c", "earliest")
    p0 = await ml.add_entry(b"a")
    bookies.fail_adds = 1
    with pytest.raises(ManagedLedgerWriteError):
        await ml.add_entry(b"b")
    p2 = await ml.add_entry(b"c")
    assert p2.ledger_id > p0.ledger_id
    assert [e.data for e in await c.read_entries(10)] == [b"a", b"c"]


async def test_create_failure_fails_waiting_add_then_recovers(factory, bookies, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=1))
    bookies.fail_creates = 1
    bookies.create_delay = 0.05  # "b" comes while the rollover after "a" creates the next ledger
    pa = await ml.add_entry(b"a")
    with pytest.raises(ManagedLedgerWriteError):
        await ml.add_entry(b"b")
    bookies.create_delay = 0.0
    p = await ml.add_entry(b"c")
    assert p.entry_id == 0 and p.ledger_id > pa.ledger_id  # ("a"'s ledger may be trimmed: no cursor)


async def test_terminate(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        await ml.add_entry(b"a")
        last = await ml.add_entry(b"b")
        assert await ml.terminate() == last
        with pytest.raises(ManagedLedgerTerminatedError):
            await ml.add_entry(b"c")
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        assert ml.terminated_position == last
        with pytest.raises(ManagedLedgerTerminatedError):
            await ml.add_entry(b"c")
        c = await ml.open_cursor("c", "earliest")
        assert len(await c.read_entries(10)) == 2


async def test_internal_stats_shape(factory) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("sub", "earliest")
    ps = [await ml.add_entry(b"12345") for _ in range(4)]
    await c.delete([ps[2]])
    s = ml.internal_stats()
    assert s["entriesAddedCounter"] == 4 and s["numberOfEntries"] == 4 and s["totalSize"] == 20
    assert s["currentLedgerEntries"] == 4 and s["lastConfirmedEntry"] == str(ps[-1])
    assert s["state"] == "LedgerOpened" and s["ledgers"][0]["entries"] == 4
    cs = s["cursors"]["sub"]
    assert cs["individuallyDeletedMessages"] == f"[({ps[1]}..{ps[2]}]]"
    assert cs["markDeletePosition"] == f"{ps[0].ledger_id}:-1" and cs["totalNonContiguousDeletedMessagesRange"] == 1


async def test_list_names_and_delete(factory, meta, bookies) -> None:
    for t in ("a", "b"):
        ml = await factory.open(f"t/ns/persistent/{t}")
        await ml.add_entry(b"x")
        await ml.open_cursor("s")
    assert await factory.list_names("t/ns/persistent") == ["t/ns/persistent/a", "t/ns/persistent/b"]
    assert await factory.list_names("t") == ["t/ns/persistent/a", "t/ns/persistent/b"]
    await factory.delete("t/ns/persistent/a")
    assert await factory.list_names("t/ns") == ["t/ns/persistent/b"]
    assert not any(p.startswith("/managed-ledgers/t/ns/persistent/a") for p in meta.nodes)
    owners = {l.custom_metadata.get("pulsar/managed-ledger") for l in bookies.ledgers.values()}
    assert owners == {b"t/ns/persistent/b"}  # a's ledgers are gone


async def test_pending_add_bound_keeps_order(factory, bookies, config) -> None:
    bookies.add_delay = 0.002
    ml = await factory.open(NAME, config.replace(max_pending_adds=3, max_entries_per_ledger=7))
    c = await ml.open_cursor("c", "earliest")
    results: dict[int, Position] = {}
    peak = 0

    async def add(i: int) -> None:
        nonlocal peak
        results[i] = await ml.add_entry(f"{i}".encode())
        peak = max(peak, sum(w.inflight for w in ml._writes.values()))

    async with trio.open_nursery() as n:
        for i in range(30):
            n.start_soon(add, i)
    assert peak <= 3
    by_position = [str(i).encode() for i, _ in sorted(results.items(), key=lambda kv: kv[1])]
    assert [e.data for e in await c.read_entries(100)] == by_position


async def test_cancelled_adds_do_not_block_later_ones(factory, bookies, config) -> None:
    bookies.add_delay = 0.01
    ml = await factory.open(NAME, config.replace(max_pending_adds=1))
    with trio.move_on_after(0.005):
        async with trio.open_nursery() as n:
            for _ in range(5):
                n.start_soon(ml.add_entry, b"x")
    with trio.fail_after(5):
        p = await ml.add_entry(b"after")
    assert p.entry_id >= 0


async def test_tailing_reader_follows_rollover(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=2))
    c = await ml.open_cursor("tail")
    got: list[Position] = []

    async def reader() -> None:
        while len(got) < 7:
            got.extend(e.position for e in await c.read_entries_or_wait(10))

    async with trio.open_nursery() as n:
        n.start_soon(reader)
        written = []
        for i in range(7):
            written.append(await ml.add_entry(b"%d" % i))
            await trio.sleep(0.001)
    assert got == written and len({p.ledger_id for p in written}) == 4


async def test_an_add_queued_behind_a_failed_add_is_not_stored_after_it(factory, bookies, config) -> None:
    """Pulsar re-issues a failed add and every later one, in order, to the next ledger; failing
    the later ones too would also do. Failing one add while storing the one queued behind it
    leaves a hole: the broker's dedup then counts the later sequence id as persisted and
    acknowledges the producer's re-send of the failed one as a duplicate without storing it."""
    ml = await factory.open(NAME, config.replace(max_pending_adds=1))
    cursor = await ml.open_cursor("c", "earliest")
    await ml.add_entry(b"a")
    bookies.add_delay = 0.05
    bookies.fail_adds = 1
    results: dict[bytes, object] = {}

    async def add(data: bytes) -> None:
        try:
            results[data] = await ml.add_entry(data)
        except ManagedLedgerWriteError as exc:
            results[data] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(add, b"b")
        await trio.sleep(0.01)  # b is in flight: c waits for the add slot behind it
        nursery.start_soon(add, b"c")
    b_failed = isinstance(results[b"b"], ManagedLedgerWriteError)
    c_stored = not isinstance(results[b"c"], ManagedLedgerWriteError)
    stored = [e.data for e in await cursor.read_entries(10)]
    assert not (b_failed and c_stored), f"b failed, c stored: {stored}"


async def test_an_add_arriving_while_a_failed_rollover_closes_its_old_ledger_is_not_stored_first(
        factory, bookies, config) -> None:
    """The symptom of the seed-21 chaos finding (a later SEND stored first in a new ledger, ahead
    of earlier failed ones; tests/broker/test_send_order_after_failure.py) by another path, found
    while looking for it on the current code.

    A rollover (the ledger is full) whose ledger creation fails leaves the managed ledger
    CLOSED_LEDGER and then closes the old ledger (a metadata write: slow when ZooKeeper is).
    An add that began during the rollover ("b") fails with it. An add that arrived while the
    old ledger was closing ("c", sent after "b") was queued behind "b" with nothing to fail it:
    it retried the rollover and was stored first in the next ledger; the producer, told "b"
    failed, re-sent "b" and "c" after it. Every add queued behind a failed one must fail too."""
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=1))
    cursor = await ml.open_cursor("c", "earliest")
    bookies.fail_creates = 1
    bookies.create_gate = trio.Event()
    bookies.close_gate = trio.Event()
    await ml.add_entry(b"a")  # the ledger is full: a rollover starts, its create will fail
    results: dict[bytes, object] = {}

    async def add(data: bytes, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()  # the add begins in this step: call order = the order of the starts
        try:
            results[data] = await ml.add_entry(data)
        except ManagedLedgerError as exc:
            results[data] = exc

    async with trio.open_nursery() as nursery:
        await nursery.start(add, b"b")  # during the rollover
        await trio.testing.wait_all_tasks_blocked()  # "b" waits for the rollover
        bookies.create_gate.set()
        with trio.fail_after(5):
            while ml.state.name != "CLOSED_LEDGER":  # the create failed; the old ledger is closing
                await trio.sleep(0.001)
        await nursery.start(add, b"c")
        await trio.sleep(0.01)
        bookies.close_gate.set()
    assert isinstance(results[b"b"], ManagedLedgerError), results
    # the producer re-sends what was not acknowledged, in its order
    for data in (b"b", b"c"):
        if isinstance(results[data], ManagedLedgerError):
            await ml.add_entry(data)
    stored = [e.data for e in await cursor.read_entries(10)]
    assert stored == [b"a", b"b", b"c"], f"stored in this order: {stored} (results: {results})"
