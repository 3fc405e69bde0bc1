"""The per-connection timeout monitor: requests time out on time, and a connection whose
requests are answered does not wake every ``timeout_monitor_interval_ms`` (idle wake-ups of
five processes on two cores are scheduling delay for the adds of the others)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from bookie.client.bookie_connection import BookieConnection
from bookie.client.distribution import CLIENT_TIMEOUT
from bookie.protocol import Op, Request
from tests.bookie.client.conftest import fast_config
from tests.bookie.client.fake_bookie import FakeBookie


@asynccontextmanager
async def _connection(nursery: trio.Nursery) -> AsyncIterator[tuple[FakeBookie, BookieConnection]]:
    """A connection to a fake bookie whose monitor would scan every 20 ms."""
    fb = FakeBookie()
    await fb.start(nursery)
    conn = BookieConnection(fb.bookie_id, nursery, fast_config(timeout_monitor_interval_ms=20))
    try:
        yield fb, conn
    finally:
        conn.close()


async def _answered(conn: BookieConnection, timeout_s: float) -> int:
    done = trio.Event()
    got: list[int] = []

    def cb(status: int, _resp: object) -> None:
        got.append(status)
        done.set()

    conn.send(Request(Op.READ_LAC, 0, ledger_id=1), cb, timeout_s)
    with trio.fail_after(10):
        await done.wait()
    return got[0]


async def test_idle_connection_does_not_wake_every_interval(nursery):
    async with _connection(nursery) as (fb, conn):
        await _answered(conn, timeout_s=1.0)  # connected, monitor running, nothing outstanding
        scans, t0 = conn.timeout_scans, trio.current_time()
        await trio.sleep(0.5)
        elapsed = trio.current_time() - t0
        # Nothing can expire sooner than 1 s after the next send: at most one scan per second
        # (scanning every 20 ms, this was ~25).
        assert conn.timeout_scans - scans <= elapsed / 1.0 + 2


async def test_shorter_timeout_sent_while_the_monitor_sleeps_still_expires(nursery):
    async with _connection(nursery) as (fb, conn):
        await _answered(conn, timeout_s=30.0)  # the monitor now sleeps towards a 30 s deadline
        fb.faults.drop_all = True
        long: list[int] = []
        conn.send(Request(Op.READ_LAC, 0, ledger_id=1), lambda s, _r: long.append(s), 30.0)
        await trio.sleep(0.1)
        # a request with a shorter timeout than any before wakes it: expired in ~0.2 s, not 30
        assert await _answered(conn, timeout_s=0.2) == CLIENT_TIMEOUT
        assert long == []  # the 30 s one is still outstanding
        assert conn.outstanding == 1


async def test_a_long_timeout_outstanding_does_not_make_it_wake_every_interval(nursery):
    async with _connection(nursery) as (fb, conn):
        await _answered(conn, timeout_s=0.2)  # the shortest timeout seen: 0.2 s
        fb.faults.drop_all = True
        conn.send(Request(Op.READ_LAC, 0, ledger_id=1), lambda s, _r: None, 30.0)  # a long poll, say
        await trio.sleep(0.3)  # older than the shortest timeout now, far from its own deadline
        scans, t0 = conn.timeout_scans, trio.current_time()
        await trio.sleep(0.5)
        elapsed = trio.current_time() - t0
        # its own deadline is 30 s away: nothing to look at meanwhile (every 20 ms, ~25 scans)
        assert conn.timeout_scans - scans <= elapsed / 0.2 + 2
        assert conn.outstanding == 1
