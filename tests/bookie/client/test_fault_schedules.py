"""Property test (hypothesis): random fault schedules never lose an acknowledged entry.

A writer streams adds while bookies crash, restart, fail adds, hang or slow down; then the
writer disappears and another client recovers the ledger (retrying while recovery cannot
decide, after the faults heal). Invariant: the recovered ledger's last entry id is >= every
entry ever acknowledged to the writer, and every entry up to it reads back identical to what
was submitted (acknowledged ones under their acknowledged id), with no duplicates.
"""

from __future__ import annotations

import itertools

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metadata
from bookie.client import BKError, BKLedgerRecoveryError, BookKeeper
from bookie.protocol import Status
from tests.bookie.client.conftest import FakeCluster, fast_config

N_BOOKIES = 5

fault = st.one_of(
    st.tuples(st.just("crash"), st.integers(0, N_BOOKIES - 1)),
    st.tuples(st.just("restart"), st.integers(0, N_BOOKIES - 1)),
    st.tuples(st.just("add_error"), st.integers(0, N_BOOKIES - 1),
              st.sampled_from([Status.IO, Status.TOO_MANY_REQUESTS, Status.READ_ONLY])),
    st.tuples(st.just("hang"), st.integers(0, N_BOOKIES - 1)),
    st.tuples(st.just("slow"), st.integers(0, N_BOOKIES - 1)),
    st.tuples(st.just("read_error"), st.integers(0, N_BOOKIES - 1)),
    st.tuples(st.just("heal"), st.integers(0, N_BOOKIES - 1)),
)
step = st.one_of(st.tuples(st.just("add"), st.integers(1, 25)), fault)
quorums = st.sampled_from([(3, 2, 2), (3, 3, 2), (3, 3, 3), (3, 2, 1), (2, 2, 2)])


def _apply(cluster: FakeCluster, bookies, action) -> None:
    kind, idx = action[0], action[1]
    fb = bookies[idx]
    if kind == "crash":
        fb.crash()
    elif kind == "add_error":
        fb.faults.add_status = action[2]
    elif kind == "hang":
        fb.faults.drop_all = True
    elif kind == "slow":
        fb.faults.add_delay_s = 0.2
    elif kind == "read_error":
        fb.faults.read_status = Status.IO
        fb.faults.fence_status = Status.IO
    elif kind == "heal":
        fb.faults.clear()


async def _scenario(quorum, steps) -> None:
    with trio.fail_after(60):  # a hang is a failure of this example, not of the whole run
        await _scenario_body(quorum, steps)


async def _scenario_body(quorum, steps) -> None:
    store = await metadata.open_store("memory://")
    counter = itertools.count()
    submitted: set[bytes] = set()
    acked: dict[int, bytes] = {}
    try:
        async with trio.open_nursery() as nursery:
            cluster = FakeCluster(nursery, store)
            bookies = [await cluster.add_bookie() for _ in range(N_BOOKIES)]
            cfg = fast_config(add_entry_timeout_s=0.5, read_timeout_s=0.5, first_speculative_read_timeout_ms=100)
            async with BookKeeper(store, cfg) as writer_bk:
                lh = await writer_bk.create_ledger(*quorum)
                broken = False

                async def add_one() -> None:
                    nonlocal broken
                    data = b"payload-%d" % next(counter)
                    submitted.add(data)
                    try:
                        acked[await lh.add_entry(data)] = data
                    except BKError:
                        broken = True  # e.g. no bookie left to replace a failed one

                for action in steps:
                    if action[0] == "add":
                        if broken:
                            continue
                        with trio.move_on_after(10):
                            async with trio.open_nursery() as n:
                                for _ in range(action[1]):
                                    n.start_soon(add_one)
                    elif action[0] == "restart":
                        fb = bookies[action[1]]
                        if fb._scope is None:
                            await fb.restart(nursery)
                    else:
                        _apply(cluster, bookies, action)
                # the writer vanishes without closing; its client goes away
            async with BookKeeper(store, cfg) as bk:
                for attempt in range(3):
                    try:
                        rh = await bk.open_ledger(lh.ledger_id)
                        break
                    except BKLedgerRecoveryError:
                        if attempt == 2:
                            raise
                        # heal everything (a real operator restarts bookies) and retry
                        for fb in bookies:
                            fb.faults.clear()
                            if fb._scope is None:
                                await fb.restart(nursery)
                last = rh.last_add_confirmed
                assert last >= max(acked, default=-1), (last, sorted(acked)[-5:])
                for fb in bookies:
                    fb.faults.clear()
                    if fb._scope is None:
                        await fb.restart(nursery)
                entries = await rh.read(0, last) if last >= 0 else []
                seen = set()
                for e in entries:
                    if e.entry_id in acked:
                        assert e.data == acked[e.entry_id]
                    assert e.data in submitted and e.data not in seen
                    seen.add(e.data)
                md = await bk.get_ledger_metadata(lh.ledger_id)
                assert md.is_closed and md.last_entry_id == last
                assert md.length == sum(len(e.data) for e in entries)
            nursery.cancel_scope.cancel()
    finally:
        await store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(quorum=quorums, steps=st.lists(step, min_size=1, max_size=10))
def test_acknowledged_entries_survive_any_fault_schedule(quorum, steps):
    trio.run(_scenario, quorum, steps)
