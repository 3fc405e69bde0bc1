"""Fencing recovery with the seed's response mixes (fake bookies)."""

from __future__ import annotations

import pytest
import trio

from bookie.client import BKLedgerRecoveryError, BookKeeper, LedgerState
from bookie.client.ledger_metadata import encode_metadata
from bookie.client.recovery import LedgerRecoveryOp
from bookie.protocol import Flag, Op, Status
from metadata.ledger_ids import ledger_path
from tests.bookie.client.conftest import fast_config
from tests.bookie.client.fake_bookie import DROP


async def _write(bk, n, e=3, wq=3, aq=2, password=b""):
    lh = await bk.create_ledger(e, wq, aq, password=password)
    for i in range(n):
        await lh.add_entry(b"entry-%d" % i)
    return lh  # abandoned: never closed (the writer "crashed")


async def _state(bk, lh):
    return await bk.get_ledger_metadata(lh.ledger_id)


async def test_recover_empty_ledger(bk, cluster):
    lh = await bk.create_ledger(3, 2, 2)
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.is_closed and rh.last_add_confirmed == -1 and rh.length == 0
    md = await _state(bk, lh)
    assert (md.state, md.last_entry_id, md.length) == (LedgerState.CLOSED, -1, 0)
    # every bookie of the ensemble was fenced
    for fb in cluster.in_ensemble(md.last_ensemble):
        assert fb.ledgers[lh.ledger_id].fenced


async def test_recover_finds_entries_beyond_the_lac(bk, cluster):
    lh = await _write(bk, 10)
    # the bookies' LAC (piggybacked) is 8; entry 9 must be found by recovery reads
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 9 and rh.length == lh.length
    assert [e.data for e in await rh.read(0, 9)] == [b"entry-%d" % i for i in range(10)]
    # recovery reads carried FENCE (TLA+ finding: fencing only the LAC reads is not enough)
    fb = cluster[rh.metadata.last_ensemble[0]]
    recovery_reads = [r for r in fb.requests if r[0] == Op.READ and r[2] >= 0 and r[3] & Flag.FENCE]
    assert recovery_reads


async def test_positive_reply_wins_early(bk, cluster):
    """Entry 9 exists on one bookie only; a NO_ENTRY and then the positive reply arrive first:
    the entry is recoverable at once, the late second NO_ENTRY (which alone would have met the
    negative threshold) is ignored."""
    lh = await _write(bk, 10)
    ens = cluster.in_ensemble(lh.metadata.last_ensemble)
    ens[0].lose_entry(lh.ledger_id, 9)
    ens[1].lose_entry(lh.ledger_id, 9)
    ens[1].faults.delay_s = 0.3  # its negative comes after the decision
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 9
    # and it was re-replicated with RECOVERY_ADD to the write set (AQ of it before the close)
    for fb in ens:
        assert any(r[0] == Op.ADD and r[2] == 9 and r[3] & Flag.RECOVERY_ADD for r in fb.requests)
    assert 9 in ens[0].entry_ids(lh.ledger_id) and 9 in ens[2].entry_ids(lh.ledger_id)


async def test_negative_threshold_closes(bk, cluster):
    """WQ=3 AQ=2: (WQ-AQ)+1 = 2 NO_ENTRY replies make entry 10 unrecoverable even if the
    third bookie never answers."""
    lh = await _write(bk, 10)
    ens = cluster.in_ensemble(lh.metadata.last_ensemble)
    ens[2].faults.entry_status[10] = DROP
    with trio.fail_after(5):
        rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 9


async def test_unknown_replies_abort_without_closing(bk, cluster):
    """Entry 9 on one bookie that is unreachable; the others answer IO / NO_ENTRY:
    neither threshold is reachable, so recovery aborts and nothing is truncated."""
    lh = await _write(bk, 10)
    ens = cluster.in_ensemble(lh.metadata.last_ensemble)
    ens[0].lose_entry(lh.ledger_id, 9)
    ens[1].lose_entry(lh.ledger_id, 9)
    ens[0].faults.entry_status[9] = Status.IO
    ens[2].faults.entry_status[9] = DROP  # it has the entry but does not answer (timeout)
    with pytest.raises(BKLedgerRecoveryError):
        await bk.open_ledger(lh.ledger_id)
    md = await _state(bk, lh)
    assert md.state is LedgerState.IN_RECOVERY and md.last_entry_id == -1
    # once the bookie answers again, a retry recovers the entry
    ens[2].faults.clear()
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 9
    assert (await rh.read(9, 9))[0].data == b"entry-9"


async def test_seed_truncation_example(bk, cluster):
    """Seed 000: WQ=3 AQ=2, entry 10 was written to b1 and b3 only and then lost on b1.
    A bookie that answers IO (not NO_ENTRY) for an entry it should have must not make
    recovery truncate the ledger at 9."""
    lh = await _write(bk, 11)  # entries 0..10; bookies know LAC 9
    b1, b2, b3 = cluster.in_ensemble(lh.metadata.last_ensemble)
    b2.lose_entry(lh.ledger_id, 10)  # never reached b2 (ensemble change in the story)
    b1.lose_entry(lh.ledger_id, 10)  # lost on b1 ...
    b1.faults.entry_status[10] = Status.IO  # ... which correctly answers IO
    b3.faults.delay_s = 0.3  # and the holder answers last
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 10
    assert (await rh.read(10, 10))[0].data == b"entry-10"


async def test_seed_truncation_example_holder_down_aborts(bk, cluster):
    lh = await _write(bk, 11)
    b1, b2, b3 = cluster.in_ensemble(lh.metadata.last_ensemble)
    b2.lose_entry(lh.ledger_id, 10)
    b1.lose_entry(lh.ledger_id, 10)
    b1.faults.entry_status[10] = Status.IO
    b3.faults.entry_status[10] = DROP
    with pytest.raises(BKLedgerRecoveryError):
        await bk.open_ledger(lh.ledger_id)
    assert (await _state(bk, lh)).state is LedgerState.IN_RECOVERY


async def test_fencing_needs_quorum_coverage(bk, cluster):
    """E=3 WQ=3 AQ=2: fencing needs (E-AQ)+1 = 2 replies; with two bookies silent it fails."""
    lh = await _write(bk, 3)
    ens = cluster.in_ensemble(lh.metadata.last_ensemble)
    ens[0].faults.drop_all = True
    rh = await bk.open_ledger(lh.ledger_id)  # one silent bookie: still covered
    assert rh.last_add_confirmed == 2

    lh2 = await _write(bk, 3)
    for fb in cluster.in_ensemble(lh2.metadata.last_ensemble)[:2]:
        fb.faults.drop_all = True
    with pytest.raises(BKLedgerRecoveryError):
        await bk.open_ledger(lh2.ledger_id)
    assert (await _state(bk, lh2)).state is LedgerState.IN_RECOVERY


async def test_fence_errors_are_not_fenced_replies(bk, cluster):
    lh = await _write(bk, 3)
    for fb in cluster.in_ensemble(lh.metadata.last_ensemble)[:2]:
        fb.faults.fence_status = Status.IO
    with pytest.raises(BKLedgerRecoveryError):
        await bk.open_ledger(lh.ledger_id)


async def test_multi_ensemble_lac_floor(bk, cluster, store):
    """#2615: the last ensemble's bookies know nothing (LAC -1); recovery must start at the
    first entry of the last ensemble - 1, not re-read (and truncate) the old segments."""
    extra = [await cluster.add_bookie() for _ in range(3)]
    lh = await _write(bk, 5)
    md = lh.metadata.with_ensemble(5, tuple(fb.bookie_id for fb in extra))
    _, stat = await store.get(ledger_path(lh.ledger_id))
    await store.put(ledger_path(lh.ledger_id), encode_metadata(md), stat.version)
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 4 and rh.length == lh.length
    assert [e.data for e in await rh.read(0, 4)] == [b"entry-%d" % i for i in range(5)]


async def test_multi_ensemble_after_real_ensemble_change(bk, cluster):
    await cluster.add_bookie()
    lh = await bk.create_ledger(3, 3, 3)
    for i in range(10):
        await lh.add_entry(b"entry-%d" % i)
    cluster[lh.metadata.last_ensemble[1]].faults.add_status = Status.IO
    for i in range(10, 20):
        await lh.add_entry(b"entry-%d" % i)
    assert len(lh.metadata.ensembles) == 2
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 19
    assert [e.data for e in await rh.read(0, 19)] == [b"entry-%d" % i for i in range(20)]


async def test_recovery_rewrites_through_an_ensemble_change(bk, cluster):
    """A bookie of the last ensemble is down during recovery: the re-written entries go to a
    replacement (a new segment in IN_RECOVERY), and the ledger still closes at the end."""
    await cluster.add_bookie()
    lh = await _write(bk, 20, e=3, wq=2, aq=2)
    down = cluster[lh.metadata.last_ensemble[2]]
    down.crash()
    rh = await bk.open_ledger(lh.ledger_id)
    assert rh.last_add_confirmed == 19
    assert down.bookie_id not in rh.metadata.last_ensemble
    assert [e.data for e in await rh.read(0, 19)] == [b"entry-%d" % i for i in range(20)]


async def test_concurrent_recoveries_agree(store, cluster):
    async with BookKeeper(store, fast_config()) as bk1, BookKeeper(store, fast_config()) as bk2:
        lh = await _write(bk1, 15)
        results = []

        async def recover(bk):
            results.append((await bk.open_ledger(lh.ledger_id)).last_add_confirmed)

        async with trio.open_nursery() as n:
            n.start_soon(recover, bk1)
            n.start_soon(recover, bk2)
        assert results == [14, 14]
        assert (await bk1.get_ledger_metadata(lh.ledger_id)).last_entry_id == 14


async def test_recovery_op_reports_progress(bk, cluster):
    lh = await _write(bk, 4)
    md, version = await bk.ledger_manager.read(lh.ledger_id)
    from bookie.client.ledger_metadata import master_key

    op = LedgerRecoveryOp(bk.ctx, lh.ledger_id, (md, version), master_key(b""))
    md, _ = await op.run()
    assert op.fenced_lac == 2 and op.recovered_entries == 1 and md.last_entry_id == 3


async def test_aborted_recovery_leaves_no_half_done_ensemble_change(bk, cluster):
    """Found by the fault-schedule property test: an attempt that replaced a bookie and then
    aborted must not persist the new segment (its replacement lacks the re-written entries,
    and the next attempt would read NO_ENTRY there and truncate acknowledged entries)."""
    spare = await cluster.add_bookie()
    await cluster.unregister(spare)
    lh = await _write(bk, 10, e=3, wq=2, aq=2)  # entry 9 on indices 0 and 1; bookies' LAC 8
    original = lh.metadata.ensembles
    down = cluster[lh.metadata.last_ensemble[1]]
    down.crash()
    await cluster.store.create(f"/ledgers/available/{spare.bookie_id}", b"")
    spare.faults.drop_all = True  # the only replacement hangs: the re-write cannot reach AQ
    with pytest.raises(BKLedgerRecoveryError):
        await bk.open_ledger(lh.ledger_id)
    md = await _state(bk, lh)
    assert md.state is LedgerState.IN_RECOVERY and md.ensembles == original
    spare.faults.clear()
    async with BookKeeper(cluster.store, fast_config()) as bk2:  # fresh client: no quarantine memory
        rh = await bk2.open_ledger(lh.ledger_id)
        assert rh.last_add_confirmed == 9
        md = await _state(bk2, lh)
        assert md.ensembles[0] == original[0] and spare.bookie_id in md.last_ensemble
        assert [e.data for e in await rh.read(0, 9)] == [b"entry-%d" % i for i in range(10)]
