"""Reconnect: the broker is SIGKILLed and restarted mid-stream; nothing acknowledged is lost.

Pending sends are re-sent in order after the producer re-creates itself; with broker
deduplication on, the topic then holds every message exactly once, in order. The consumer
resubscribes on its own and sees every message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from clients import AsyncClient, InitialPosition, Timeout
from tests.clients.conftest import start_broker, wait_for_default_namespace
from tests.fixtures.processes import QuireProcess

N = 400


def _start_with_dedup(base: Path):  # type: ignore[no-untyped-def]
    node = start_broker(base)
    node.proc.terminate()
    # Same ports and data dir, deduplication on.
    node.proc = QuireProcess.quire(
        [*node.proc.argv[3:], "--set", "broker_deduplication_enabled=true"],
        log_path=base / "standalone-dedup.log",
        ready_url=f"http://127.0.0.1:{node.web_port}/admin/v2/clusters",
    )
    node.proc.start()
    node.proc.wait_ready(60)
    wait_for_default_namespace(node.web_port)
    return node


async def test_broker_killed_mid_stream(tmp_path: Path) -> None:
    node = await trio.to_thread.run_sync(_start_with_dedup, tmp_path)
    topic = "persistent://public/default/reconnect"
    try:
        async with AsyncClient(node.url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
            # Never acks during the run: keeps every ledger (no retention) for the final audit.
            audit = await client.subscribe(topic, "audit", initial_position=InitialPosition.Earliest,
                                           receiver_queue_size=10)
            producer = await client.create_producer(
                topic, producer_name="survivor", send_timeout_millis=0, block_if_queue_full=True,
                batching_max_publish_delay_ms=5,
            )
            received: list[bytes] = []
            futures = []

            async def consume() -> None:
                while True:
                    msg = await consumer.receive()
                    received.append(msg.data())
                    await consumer.acknowledge(msg)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                for i in range(N):
                    futures.append(await producer.send_async(b"%05d" % i))
                    if i == N // 3:
                        await trio.to_thread.run_sync(node.proc.kill)
                    if i == N // 2:
                        await trio.to_thread.run_sync(node.proc.restart)
                    await trio.sleep(0.002)
                with trio.fail_after(60):
                    ids = [await f.wait() for f in futures]  # every send eventually acknowledged
                with trio.fail_after(60):
                    while len(set(received)) < N:
                        await trio.sleep(0.1)
                nursery.cancel_scope.cancel()

            # Re-sent duplicates are answered by the broker's dedup with (-1, -1), as Pulsar does.
            persisted = [i for i in ids if i.ledger_id() >= 0]
            assert persisted == sorted(persisted) and len(persisted) >= N // 2
            expected = [b"%05d" % i for i in range(N)]
            # At-least-once at the consumer: every message, first occurrences in order.
            first_seen = list(dict.fromkeys(received))
            assert first_seen == expected
            # Deduplication: the topic itself holds each message exactly once, in order.
            stored = []
            while True:
                try:
                    msg = await audit.receive(2000)
                except Timeout:
                    break
                stored.append(msg.data())
                await audit.acknowledge(msg)
            assert stored == expected
    finally:
        await trio.to_thread.run_sync(node.proc.kill)


async def test_keep_alive_detects_paused_broker(tmp_path: Path) -> None:
    node = await trio.to_thread.run_sync(start_broker, tmp_path)
    topic = "persistent://public/default/keepalive"
    try:
        async with AsyncClient(node.url, keep_alive_interval_seconds=1.0) as client:
            consumer = await client.subscribe(topic, "sub")
            producer = await client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
            await producer.send(b"before")
            first_cnx = producer._cnx
            await trio.sleep(2.5)  # answered pings keep an idle connection open
            assert producer._cnx is first_cnx and not first_cnx.is_closed
            timed = await client.create_producer(topic + "-timed", batching_enabled=False, send_timeout_millis=500)
            node.proc.pause()
            try:
                late = await timed.send_async(b"unanswered")
                with trio.fail_after(10):
                    with pytest.raises(Timeout):  # send_timeout_millis against a real, stalled broker
                        await late.wait()
                    await first_cnx.closed.wait()
                assert first_cnx.close_reason == "keep-alive timeout"
            finally:
                node.proc.resume()
            await producer.send(b"after")  # re-connected on its own
            assert producer._cnx is not first_cnx
            # "before" was never acknowledged: after the reconnect the broker may deliver it again
            # (at least once), but nothing is lost and "after" comes after it
            got = [(await consumer.receive(10000)).data()]
            while got[-1] != b"after":
                got.append((await consumer.receive(10000)).data())
            assert got[0] == b"before" and set(got) == {b"before", b"after"}
    finally:
        await trio.to_thread.run_sync(node.proc.kill)
