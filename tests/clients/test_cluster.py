"""Our client against a cluster: real ZooKeeper, two bookies, two brokers.

Lookups are redirected to the owner of the topic's bundle; when the owner is SIGKILLed the
client re-looks the topic up (through the other host of a multi-host service URL), follows the
new owner and keeps producing; every acknowledged message is consumed.
"""

from __future__ import annotations

from pathlib import Path

import trio

from clients import AsyncClient, InitialPosition
from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import QuireProcesses, free_port


def _broker(procs: QuireProcesses, zk_url: str) -> int:
    port, web = free_port(), free_port()
    procs("broker", "--metadata-url", zk_url, "--port", str(port), "--web-port", str(web),
          "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
          "--set", "metadata_store_session_timeout_millis=4000",
          "--set", "managed_ledger_default_ensemble_size=2", "--set", "managed_ledger_default_write_quorum=2",
          "--set", "managed_ledger_default_ack_quorum=2", "--log-level", "WARNING",
          ready_url=f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=60)
    return port


async def test_redirects_and_owner_failover(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    def start() -> tuple[int, int]:
        for i in range(2):
            start_bookie(quire_procs, zk_url, tmp_path, i)
        return _broker(quire_procs, zk_url), _broker(quire_procs, zk_url)

    p1, p2 = await trio.to_thread.run_sync(start)
    procs = {p1: quire_procs.procs[-2], p2: quire_procs.procs[-1]}
    topic = "persistent://public/default/failover"
    # The load manager places the bundle on one of the two (the least loaded): call it A.
    async with AsyncClient(f"pulsar://127.0.0.1:{p1}") as first:
        created = await first.create_producer(topic)
        pa = int(created._cnx.url.rsplit(":", 1)[1])
        await created.close()
    pb = p2 if pa == p1 else p1
    broker_a = procs[pa]
    # This client's service URL lists B first: its lookups are redirected to A.
    async with AsyncClient(f"pulsar://127.0.0.1:{pb},127.0.0.1:{pa}", operation_timeout_seconds=10) as client:
        consumer = await client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
        producer = await client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
        assert producer._cnx.url == f"pulsar://127.0.0.1:{pa}"  # redirected to the owner
        futures = [await producer.send_async(b"%03d" % i) for i in range(20)]
        for f in futures[:10]:
            await f.wait()
        await trio.to_thread.run_sync(broker_a.kill)
        futures += [await producer.send_async(b"%03d" % i) for i in range(20, 40)]
        with trio.fail_after(60):
            ids = [await f.wait() for f in futures]
        assert producer._cnx.url == f"pulsar://127.0.0.1:{pb}"  # the new owner
        persisted = [i for i in ids if i.ledger_id() >= 0]
        assert persisted == sorted(persisted)
        seen: list[bytes] = []
        with trio.fail_after(60):
            while len(set(seen)) < 40:
                msg = await consumer.receive()
                seen.append(msg.data())
                await consumer.acknowledge(msg)
        assert list(dict.fromkeys(seen)) == [b"%03d" % i for i in range(40)]
