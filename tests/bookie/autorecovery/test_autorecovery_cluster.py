"""Auto-recovery on a real cluster: real ZooKeeper, three `quire bookie` processes, E=WQ=AQ=2.

- SIGKILL one bookie: the auditor (elected among the bookies' daemons) marks its ledgers, the
  replication workers copy every fragment it held to the third bookie, an open ledger whose
  writer is gone is fenced and closed first; then every entry is read from *each* bookie of its
  write set, and the metadata names no dead bookie.
- `quire bookie-shell decommission` drains a read-only bookie (no auditor running: the command
  runs auto-recovery itself) and refuses a writable one.
Delays are short (lost_bookie_recovery_delay 0, grace period 1 s) so each test takes seconds.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

import trio

from bookie import entry_format
from bookie.autorecovery.underreplication import UnderReplicationManager
from bookie.client import BookKeeper
from bookie.client.distribution import write_set
from bookie.protocol import Op, Request, Status
from metadata.ledger_ids import iter_ledger_ids
from tests.bookie.client.real_cluster import client_config as _config
from tests.bookie.client.real_cluster import start_bookies, wait_registered, zk_store  # noqa: F401  (fixture)
from tests.fixtures.processes import REPO_ROOT

AUTORECOVERY = ("--set", "autorecovery_daemon_enabled=true", "--set", "lost_bookie_recovery_delay=0",
                "--set", "open_ledger_rereplication_grace_period=1000", "--set", "rw_rereplicate_backoff_ms=500", "--set", "zk_timeout=4000")
ENTRIES = 60


async def _write_ledgers(store, closed: int, open_: int) -> dict[int, list[bytes]]:
    """Ledgers of ENTRIES entries (E=WQ=AQ=2); the last ``open_`` are left open by a writer that goes away."""
    written: dict[int, list[bytes]] = {}
    async with BookKeeper(store, _config()) as bk:
        for i in range(closed + open_):
            lh = await bk.create_ledger(2, 2, 2)
            data = [b"L%d-E%d-" % (i, e) + os.urandom(500) for e in range(ENTRIES)]
            for d in data:
                await lh.add_entry(d)
            if i < closed:
                await lh.close()
            written[lh.ledger_id] = data
    return written


async def _read_from(bk: BookKeeper, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
    done = trio.Event()
    out: list[bytes | None] = [None]

    def on_reply(status, resp):
        if status == Status.OK and resp is not None:
            out[0] = resp.body
        done.set()

    bk.ctx.send(bookie, Request(Op.READ, 0, ledger_id, entry_id, 0, b""), on_reply, 5.0)
    await done.wait()
    return out[0]


async def _assert_two_replicas_everywhere(store, written: dict[int, list[bytes]], gone: str) -> None:
    async with BookKeeper(store, _config()) as bk:
        assert sorted([lid async for lid in iter_ledger_ids(store)]) == sorted(written)
        for lid, data in written.items():
            md = await bk.get_ledger_metadata(lid)
            assert md.is_closed and md.last_entry_id == len(data) - 1, (lid, md)
            assert gone not in md.all_bookies(), (lid, md.ensembles)
            for eid, payload in enumerate(data):
                ens = md.ensemble_for(eid)
                replicas = [ens[i] for i in write_set(eid, md.ensemble_size, md.write_quorum_size)]
                assert len(set(replicas)) == 2
                for b in replicas:
                    body = await _read_from(bk, b, lid, eid)
                    assert body is not None, f"entry {lid}:{eid} missing on {b}"
                    assert entry_format.verify(body).entry_id == eid
                    assert entry_format.payload(body) == payload


async def _wait_drained(store, bookie: str, timeout: float) -> None:
    urm = UnderReplicationManager(store)
    async with BookKeeper(store, _config()) as bk:
        with trio.fail_after(timeout):
            while True:
                pending = [lid async for lid in urm.ledgers()]
                refs = [lid async for lid in iter_ledger_ids(store)
                        if bookie in (await bk.get_ledger_metadata(lid)).all_bookies()]
                if not pending and not refs:
                    return
                await trio.sleep(0.5)


def _metrics(http_port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def _sample(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
               or line.startswith(name + "{"))


async def test_sigkill_one_of_three_bookies_autorecovery_restores_two_replicas(zk_store, zk_url, quire_procs, tmp_path):
    bookies = await start_bookies(quire_procs, zk_url, tmp_path, 3, zk_store, extra=AUTORECOVERY)
    written = await _write_ledgers(zk_store, closed=4, open_=1)
    open_ledger = list(written)[-1]
    async with BookKeeper(zk_store, _config()) as bk:
        md = await bk.get_ledger_metadata(open_ledger)
        assert not md.is_closed
    victim = next(b for b in bookies if b.bookie_id in md.last_ensemble)  # also the open ledger's
    async with BookKeeper(zk_store, _config()) as bk:
        on_victim = [lid for lid in written if victim.bookie_id in (await bk.get_ledger_metadata(lid)).all_bookies()]
    victim.kill()
    await _wait_drained(zk_store, victim.bookie_id, timeout=90)
    await _assert_two_replicas_everywhere(zk_store, written, victim.bookie_id)
    survivors = [b for b in bookies if b is not victim]
    texts = [_metrics(b.http_port) for b in survivors]
    assert sum(_sample(t, "auditor_elected") for t in texts) == 1  # exactly one auditor
    copied = sum(_sample(t, "replication_worker_rereplicated_entries_total") for t in texts)
    # Every entry of each closed ledger on the victim (E == WQ) was copied. Of the open ledger
    # only entries up to its last confirmed one (58: the last add's LAC rode on that add) are;
    # recovery re-adds the rest, which goes to a new ensemble without the victim.
    assert copied >= ENTRIES * (len(on_victim) - 1) + ENTRIES - 1
    assert sum(_sample(t, "replication_worker_fenced_open_ledgers_total") for t in texts) == 1
    assert sum(_sample(t, "auditor_marked_ledgers_total") for t in texts) >= len(on_victim)
    assert sum(_sample(t, "replication_worker_rereplicated_ledgers_total") for t in texts) >= len(on_victim)
    with trio.fail_after(30):  # the auditor refreshes the gauge every few seconds
        while any(_sample(_metrics(b.http_port), "auditor_under_replicated_ledgers") for b in survivors):
            await trio.sleep(0.5)


async def _quire(*args: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = await trio.run_process([sys.executable, "-m", "quire", *args], capture_stdout=True,
                                  capture_stderr=True, check=False, env=env)
    return proc.returncode, (proc.stdout + proc.stderr).decode()


async def test_decommission_drains_a_read_only_bookie(zk_store, zk_url, quire_procs, tmp_path):
    bookies = await start_bookies(quire_procs, zk_url, tmp_path, 3, zk_store)
    written = await _write_ledgers(zk_store, closed=4, open_=0)
    async with BookKeeper(zk_store, _config()) as bk:
        counts = {b.bookie_id: 0 for b in bookies}
        for lid in written:
            for b in (await bk.get_ledger_metadata(lid)).all_bookies():
                counts[b] += 1
    target = max(bookies, key=lambda b: counts[b.bookie_id])
    rc, out = await _quire("bookie-shell", "decommission", "--metadata-url", zk_url, "--bookie-id", target.bookie_id)
    assert rc != 0 and "writable" in out  # a writable bookie is refused, nothing changed
    rc, out = await _quire("bookie-shell", "decommission", "--metadata-url", zk_url, "--bookie-id", "10.9.9.9:1")
    assert rc != 0 and "no bookie 10.9.9.9:1" in out
    req = urllib.request.Request(f"http://127.0.0.1:{target.http_port}/api/v1/bookie/state/readonly",
                                 data=json.dumps({"readOnly": True}).encode(), method="PUT")
    urllib.request.urlopen(req, timeout=5).read()
    with trio.fail_after(30):
        while target.bookie_id not in await zk_store.children("/ledgers/available/readonly"):
            await trio.sleep(0.1)
    rc, out = await _quire("bookie-shell", "decommission", "--metadata-url", zk_url, "--bookie-id", target.bookie_id,
                           "--set", "rw_rereplicate_backoff_ms=500", "--timeout", "120")
    assert rc == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["ledgers"] == counts[target.bookie_id] and summary["ran_autorecovery"]
    assert not summary["cookie_removed"]  # still registered (read-only): it keeps its cookie
    await _assert_two_replicas_everywhere(zk_store, written, target.bookie_id)
    assert await UnderReplicationManager(zk_store).decommissioned() == set()
    await wait_registered(zk_store, {b.bookie_id for b in bookies if b is not target})


async def test_quire_autorecovery_process_is_elected_and_serves_metrics(zk_url, quire_procs):
    from tests.fixtures.processes import free_port

    port = free_port()
    quire_procs("autorecovery", "--metadata-url", zk_url, "--http-port", str(port), "--log-level", "WARNING",
                ready_log="autorecovery .* running", timeout=60.0)
    with trio.fail_after(30):
        while "auditor_elected 1.0" not in await trio.to_thread.run_sync(_metrics, port):
            await trio.sleep(0.2)
    rc, out = await _quire("bookie-shell", "list-underreplicated", "--metadata-url", zk_url)
    assert rc == 0, out
    head = json.loads(out.splitlines()[0])
    assert head["auditor"].startswith("autorecovery/") and head["under_replicated"] == 0
