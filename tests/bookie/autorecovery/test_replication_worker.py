"""Replication worker and auditor against fake bookies on a memory store (unit level)."""

from __future__ import annotations

import dataclasses

import trio

from bookie.autorecovery.auditor import Auditor
from bookie.autorecovery.metrics import AutoRecoveryMetrics
from bookie.autorecovery.replication_worker import ReplicationWorker
from bookie.autorecovery.underreplication import AUDITOR_PATH, UnderReplicationManager
from bookie.client.ledger_metadata import decode_metadata, encode_metadata
from bookie.config import BookieConfig
from bookie.protocol import Status
from metadata.ledger_ids import ledger_path


def _config(**kw) -> BookieConfig:
    values = dict(open_ledger_rereplication_grace_period=0, rw_rereplicate_backoff_ms=10)
    values.update(kw)
    return BookieConfig(**values)


async def _write(lh, n, start=0):
    for i in range(start, start + n):
        await lh.add_entry(b"entry-%d" % i)


async def _closed_ledger(bk, n, ensemble=2, write_quorum=2):
    lh = await bk.create_ledger(ensemble, write_quorum, 2)
    await _write(lh, n)
    await lh.close()
    return lh


async def _running_auditor(nursery, bk, delay_s, marked: trio.Event) -> Auditor:
    """An elected auditor (its first audit, at election, done) that sets ``marked`` on marking."""
    auditor = Auditor(bk, _config(lost_bookie_recovery_delay=delay_s, auditor_periodic_check_interval=0),
                      AutoRecoveryMetrics(), "a", on_marked=marked.set)
    await nursery.start(auditor.run)
    with trio.fail_after(10):
        while auditor.audits < 1:
            await trio.sleep(0.01)
    return auditor


async def _lose(cluster, bookie_id):
    cluster[bookie_id].crash()
    await cluster.unregister(cluster[bookie_id])


async def test_closed_ledger_fragment_copied_and_ensemble_replaced(bk, cluster, store):
    lh = await _closed_ledger(bk, 30)
    victim, survivor = lh.metadata.last_ensemble[1], lh.metadata.last_ensemble[0]
    (spare,) = set(cluster.bookies) - {victim, survivor}
    await _lose(cluster, victim)
    urm = UnderReplicationManager(store)
    await urm.mark(lh.ledger_id, {victim})
    metrics = AutoRecoveryMetrics()
    worker = ReplicationWorker(bk, _config(rereplication_entry_batch_size=7), metrics, "w1")
    assert await worker.run_once() == 1
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.ensembles == ((0, (survivor, spare)),)
    assert cluster[spare].ledgers[lh.ledger_id].entries == cluster[survivor].ledgers[lh.ledger_id].entries
    assert len(cluster[spare].ledgers[lh.ledger_id].entries) == 30
    assert await urm.get(lh.ledger_id) is None and not await urm.is_locked(lh.ledger_id)
    assert metrics.rereplicated_entries._value.get() == 30


async def test_metadata_cas_conflict_is_reread_and_retried(bk, cluster, store):
    """Another writer changes the ledger's metadata between the worker's read and its CAS:
    the CAS fails on the version, the worker re-reads and replaces the slot in the fresh value
    (the other change is kept)."""
    lh = await _closed_ledger(bk, 10)
    victim = lh.metadata.last_ensemble[0]
    await _lose(cluster, victim)
    await UnderReplicationManager(store).mark(lh.ledger_id, {victim})
    path = ledger_path(lh.ledger_id)
    orig_put = store.put
    puts = []

    async def racing_put(p, value, expected_version=None, **kw):
        if p == path:
            puts.append(expected_version)
            if len(puts) == 1:  # someone else gets in first
                data, stat = await store.get(path)
                other = dataclasses.replace(decode_metadata(data), custom_metadata={"owner": b"other"})
                await orig_put(path, encode_metadata(other), stat.version)
        return await orig_put(p, value, expected_version, **kw)

    store.put = racing_put
    worker = ReplicationWorker(bk, _config(), AutoRecoveryMetrics(), "w1")
    assert await worker.run_once() == 1
    assert len(puts) == 2 and puts[1] == puts[0] + 1  # the retry used the re-read version
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert victim not in md.all_bookies() and md.custom_metadata == {"owner": b"other"}


async def test_earlier_segment_of_open_ledger_replicated_under_a_live_writer(bk, cluster, store):
    """An open ledger's earlier segment is re-replicated while its writer keeps writing; the
    writer's later ensemble change keeps that replacement (it owns only the last segment)."""
    await cluster.add_bookie()
    await cluster.add_bookie()
    lh = await bk.create_ledger(2, 2, 2)
    await _write(lh, 10)
    victim = lh.metadata.last_ensemble[0]
    cluster[victim].faults.add_status = Status.IO  # the writer replaces it from entry 10 on
    await _write(lh, 10, 10)
    assert len(lh.metadata.ensembles) == 2 and victim not in lh.metadata.last_ensemble
    await _lose(cluster, victim)
    await UnderReplicationManager(store).mark(lh.ledger_id, {victim})
    worker = ReplicationWorker(bk, _config(open_ledger_rereplication_grace_period=60_000), AutoRecoveryMetrics(), "w")
    assert await worker.run_once() == 1  # only an earlier segment: no fencing needed
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert victim not in md.all_bookies() and md.state.value == "OPEN"
    # the writer loses another bookie of its last ensemble: its ensemble change must succeed
    cluster[lh.metadata.last_ensemble[1]].faults.add_status = Status.IO
    await _write(lh, 10, 20)
    await lh.close()
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert victim not in md.all_bookies() and md.last_entry_id == 29
    assert [e.data for e in await lh.read(0, 29)] == [b"entry-%d" % i for i in range(30)]


async def test_open_ledger_of_a_dead_writer_is_fenced_after_the_grace_period(bk, cluster, store):
    lh = await bk.create_ledger(2, 2, 2)
    await _write(lh, 12)  # never closed: its writer "died"
    victim = lh.metadata.last_ensemble[1]
    await _lose(cluster, victim)
    await UnderReplicationManager(store).mark(lh.ledger_id, {victim})
    worker = ReplicationWorker(bk, _config(open_ledger_rereplication_grace_period=300), AutoRecoveryMetrics(), "w")
    assert await worker.run_once() == 0  # within the grace period: left for the writer
    assert (await bk.get_ledger_metadata(lh.ledger_id)).state.value == "OPEN"
    await trio.sleep(0.35)
    assert await worker.run_once() == 1
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.is_closed and md.last_entry_id == 11 and victim not in md.all_bookies()
    for b in md.last_ensemble:
        assert sorted(cluster[b].ledgers[lh.ledger_id].entries) == list(range(12))


async def test_auditor_marks_ledgers_of_lost_bookies_after_the_delay(bk, cluster, store):
    a = await _closed_ledger(bk, 3)
    victim = a.metadata.last_ensemble[0]
    await _lose(cluster, victim)
    registered = set(cluster.bookies) - {victim}
    urm = UnderReplicationManager(store)
    slow = Auditor(bk, _config(lost_bookie_recovery_delay=3600), AutoRecoveryMetrics(), "a1")
    assert await slow.audit(registered, set()) == 0  # missing, not lost yet
    assert await urm.get(a.ledger_id) is None
    fast = Auditor(bk, _config(lost_bookie_recovery_delay=0), AutoRecoveryMetrics(), "a2")
    assert await fast.audit(registered, set()) == 1
    assert (await urm.get(a.ledger_id)).missing_replicas == {victim}
    # decommissioned = lost at once, even while registered
    other = a.metadata.last_ensemble[1]
    assert await slow.audit(set(cluster.bookies), {other}) == 1
    assert (await urm.get(a.ledger_id)).missing_replicas == {victim, other}


async def test_one_auditor_is_elected_and_a_standby_takes_over(bk, store):
    config = _config(auditor_periodic_check_interval=0)
    one = Auditor(bk, config, AutoRecoveryMetrics(), "one")
    two = Auditor(bk, config, AutoRecoveryMetrics(), "two")
    async with trio.open_nursery() as nursery:
        await nursery.start(one.run)
        with trio.fail_after(5):
            while not one.is_auditor:
                await trio.sleep(0.01)
        await nursery.start(two.run)
        await trio.sleep(0.2)
        assert not two.is_auditor and await UnderReplicationManager(store).auditor() == "one"
        await store.delete(AUDITOR_PATH)  # as when the auditor's session ends
        with trio.fail_after(5):
            while not two.is_auditor:  # its watch on the election node fired
                await trio.sleep(0.01)
        assert await UnderReplicationManager(store).auditor() == "two"
        nursery.cancel_scope.cancel()


async def test_entry_check_finds_a_live_bookie_that_lost_its_data(bk, cluster, store):
    """The periodic entry check marks a registered bookie that answers NO_LEDGER for a fragment
    it should hold; the worker replaces it. A marked bookie that still has its data is left in
    place (the mark is just removed)."""
    a = await _closed_ledger(bk, 8)
    wiped, kept = a.metadata.last_ensemble
    (spare,) = set(cluster.bookies) - {wiped, kept}
    del cluster[wiped].ledgers[a.ledger_id]  # e.g. its disk was replaced under the same id
    auditor = Auditor(bk, _config(), AutoRecoveryMetrics(), "a")
    assert await auditor.check_entries(set(cluster.bookies)) == 1
    urm = UnderReplicationManager(store)
    assert (await urm.get(a.ledger_id)).missing_replicas == {wiped}
    worker = ReplicationWorker(bk, _config(), AutoRecoveryMetrics(), "w")
    assert await worker.run_once() == 1
    assert (await bk.get_ledger_metadata(a.ledger_id)).last_ensemble == (spare, kept)
    assert sorted(cluster[spare].ledgers[a.ledger_id].entries) == list(range(8))
    # a false alarm: the replica is there, nothing is copied
    await urm.mark(a.ledger_id, {kept})
    metrics = AutoRecoveryMetrics()
    assert await ReplicationWorker(bk, _config(), metrics, "w2").run_once() == 1
    assert (await bk.get_ledger_metadata(a.ledger_id)).last_ensemble == (spare, kept)
    assert metrics.rereplicated_entries._value.get() == 0


async def test_ledger_recovery_keeps_an_earlier_segment_replaced_meanwhile(bk, cluster, store):
    """Auto-recovery replaces a slot of an earlier segment while another client recovers the
    ledger: recovery's closing CAS conflicts, re-reads, and closes keeping the replacement
    (before: "ensembles changed during recovery", the recovery failed)."""
    await cluster.add_bookie()
    await cluster.add_bookie()
    lh = await bk.create_ledger(2, 2, 2)
    await _write(lh, 10)
    first = lh.metadata.last_ensemble
    cluster[first[0]].faults.add_status = Status.IO
    await _write(lh, 10, 10)  # a second segment from entry 10; the writer then goes away
    spare = next(b for b in cluster.bookies if b not in lh.metadata.all_bookies())
    path = ledger_path(lh.ledger_id)
    orig_put = store.put

    async def racing_put(p, value, expected_version=None, **kw):
        if p == path and decode_metadata(value).is_closed and store.put is racing_put:
            store.put = orig_put  # once: the worker's CAS lands just before recovery's close
            data, stat = await store.get(path)
            md = decode_metadata(data).with_replaced_bookie(0, 0, first[0], spare)
            await orig_put(path, encode_metadata(md), stat.version)
        return await orig_put(p, value, expected_version, **kw)

    store.put = racing_put
    rh = await bk.open_ledger(lh.ledger_id, recovery=True)
    assert rh.is_closed and rh.last_add_confirmed == 19
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.ensembles[0] == (0, (spare, first[1])) and md.last_entry_id == 19


async def test_auditor_loop_waits_lost_bookie_recovery_delay_and_forgets_a_returning_bookie(bk, cluster, store):
    """The running auditor sees a bookie's registration go (watch), and marks its ledgers only
    once it has been gone lost_bookie_recovery_delay; a bookie back within the delay is forgotten."""
    lh = await _closed_ledger(bk, 3)
    flapper, victim = lh.metadata.last_ensemble
    urm = UnderReplicationManager(store)
    marked = trio.Event()
    async with trio.open_nursery() as nursery:
        auditor = await _running_auditor(nursery, bk, 1, marked)
        await cluster.unregister(cluster[flapper])
        await trio.sleep(0.3)
        await store.create(f"/ledgers/available/{flapper}", b"")  # back within the delay
        t0 = trio.current_time()
        await _lose(cluster, victim)
        with trio.fail_after(15):
            await marked.wait()
        assert trio.current_time() - t0 >= 0.9  # not before the delay (1 s, minus clock granularity)
        assert (await urm.get(lh.ledger_id)).missing_replicas == {victim}
        assert flapper not in auditor.missing_since
        nursery.cancel_scope.cancel()


async def test_striped_ensemble_copies_only_the_lost_bookies_share(bk, cluster, store):
    """E=3 WQ=2: the lost bookie held 2/3 of the entries; exactly those are copied (entry by
    entry, from the other replica of each write set) to the bookie that replaces it."""
    await cluster.add_bookie()
    lh = await _closed_ledger(bk, 30, 3, 2)
    ensemble = lh.metadata.last_ensemble
    victim = ensemble[1]
    (spare,) = set(cluster.bookies) - set(ensemble)
    share = sorted(cluster[victim].ledgers[lh.ledger_id].entries)
    assert share == [e for e in range(30) if 1 in ((e % 3), (e + 1) % 3)]
    await _lose(cluster, victim)
    await UnderReplicationManager(store).mark(lh.ledger_id, {victim})
    assert await ReplicationWorker(bk, _config(), AutoRecoveryMetrics(), "w").run_once() == 1
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.last_ensemble == (ensemble[0], spare, ensemble[2])
    assert sorted(cluster[spare].ledgers[lh.ledger_id].entries) == share
    assert [e.data for e in await lh.read(0, 29)] == [b"entry-%d" % i for i in range(30)]


def test_fragments_on_segments_and_open_tails():
    from bookie.autorecovery.fragment_replicator import Fragment, fragments_on
    from bookie.client.ledger_metadata import LedgerMetadata, LedgerState

    md = LedgerMetadata(2, 2, 2, ((0, ("a", "b")), (10, ("a", "c")), (20, ("c", "d"))))
    assert fragments_on(md, {"a"}) == [Fragment(0, 9, 0, ("a", "b")), Fragment(10, 19, 0, ("a", "c"))]
    assert fragments_on(md, {"c"}) == [Fragment(10, 19, 1, ("a", "c"))]  # the open tail waits
    assert fragments_on(md, {"c"}, include_open_tail=True)[-1] == Fragment(20, 19, 0, ("c", "d"))
    closed = dataclasses.replace(md, state=LedgerState.CLOSED, last_entry_id=24)
    assert fragments_on(closed, {"d"}) == [Fragment(20, 24, 1, ("c", "d"))]


async def test_disabled_replication_pauses_the_workers(bk, cluster, store):
    lh = await _closed_ledger(bk, 5)
    victim = lh.metadata.last_ensemble[0]
    await _lose(cluster, victim)
    urm = UnderReplicationManager(store)
    await urm.set_replication_enabled(False)
    await urm.mark(lh.ledger_id, {victim})
    worker = ReplicationWorker(bk, _config(), AutoRecoveryMetrics(), "w")
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
        worker.kick()
        await trio.sleep(0.3)
        assert await urm.get(lh.ledger_id) is not None  # paused: nothing copied
        await urm.set_replication_enabled(True)
        with trio.fail_after(10):
            while await urm.get(lh.ledger_id) is not None:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert victim not in (await bk.get_ledger_metadata(lh.ledger_id)).all_bookies()


async def test_stored_lost_bookie_recovery_delay_overrides_the_configured_one(bk, cluster, store):
    lh = await _closed_ledger(bk, 3)
    victim = lh.metadata.last_ensemble[0]
    urm = UnderReplicationManager(store)
    marked = trio.Event()
    async with trio.open_nursery() as nursery:
        auditor = await _running_auditor(nursery, bk, 3600, marked)
        await _lose(cluster, victim)
        await trio.sleep(0.3)
        assert await urm.get(lh.ledger_id) is None  # an hour to go
        await urm.set_lost_bookie_recovery_delay(0)  # the operator: now
        with trio.fail_after(10):
            await marked.wait()
        assert auditor.delay == 0 and await urm.lost_bookie_recovery_delay() == 0
        nursery.cancel_scope.cancel()
    assert (await urm.get(lh.ledger_id)).missing_replicas == {victim}


async def test_a_copy_that_fails_is_retried_after_the_backoff(bk, cluster, store):
    """No replica answers: the attempt fails cleanly (mark kept, lock released, failure counted,
    the ensemble untouched), the worker leaves the ledger alone for rw_rereplicate_backoff_ms,
    and a later attempt succeeds once the survivor answers again (failed before the fix: the
    copy's exception group escaped the worker)."""
    lh = await _closed_ledger(bk, 20)
    victim, survivor = lh.metadata.last_ensemble
    await _lose(cluster, victim)
    cluster[survivor].faults.read_status = Status.IO  # the only source fails every read
    urm = UnderReplicationManager(store)
    await urm.mark(lh.ledger_id, {victim})
    metrics = AutoRecoveryMetrics()
    worker = ReplicationWorker(bk, _config(rw_rereplicate_backoff_ms=600_000), metrics, "w")
    assert await worker.run_once() == 0
    assert metrics.failures._value.get() == 1
    assert await urm.get(lh.ledger_id) is not None and not await urm.is_locked(lh.ledger_id)
    assert victim in (await bk.get_ledger_metadata(lh.ledger_id)).all_bookies()  # nothing half-done
    cluster[survivor].faults.clear()
    assert await worker.run_once() == 0  # backing off: not even tried
    assert metrics.failures._value.get() == 1
    # another worker (or this one after the back-off) succeeds
    assert await ReplicationWorker(bk, _config(), metrics, "w2").run_once() == 1
    assert victim not in (await bk.get_ledger_metadata(lh.ledger_id)).all_bookies()


async def test_a_ledger_with_an_unlisted_password_stays_marked(bk, cluster, store):
    lh = await bk.create_ledger(2, 2, 2, password=b"s3cret")
    await _write(lh, 4)
    await lh.close()
    victim = lh.metadata.last_ensemble[0]
    await _lose(cluster, victim)
    urm = UnderReplicationManager(store)
    await urm.mark(lh.ledger_id, {victim})
    metrics = AutoRecoveryMetrics()
    assert await ReplicationWorker(bk, _config(), metrics, "w").run_once() == 0
    assert metrics.failures._value.get() == 1 and await urm.get(lh.ledger_id) is not None
    worker = ReplicationWorker(bk, _config(autorecovery_ledger_passwords=["", "s3cret"]), metrics, "w2")
    assert await worker.run_once() == 1
    assert victim not in (await bk.get_ledger_metadata(lh.ledger_id)).all_bookies()
    assert [e.data for e in await lh.read(0, 3)] == [b"entry-%d" % i for i in range(4)]
