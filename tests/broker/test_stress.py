"""Concurrent producers and Shared/Key_Shared consumers with negative acks and consumer churn:
every message is delivered and acknowledged, none is lost."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pulsar
import pytest

from broker.service import BrokerService
from tests.broker.conftest import client_for, in_thread


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
async def test_no_message_lost_under_nacks_and_churn(broker: BrokerService, kind: object) -> None:
    topic = f"t-stress-{int(kind)}"  # type: ignore[call-overload]
    n_producers, per_producer = 3, 300
    expected = {f"p{p}-{i}".encode() for p in range(n_producers) for i in range(per_producer)}

    def work() -> None:
        client = client_for(broker)
        acked: set[bytes] = set()
        errors: list[BaseException] = []  # a thread's exception must fail the test, not just warn
        lock = threading.Lock()
        all_acked = threading.Event()
        rng = random.Random(7)
        try:
            def guarded(fn: Any) -> Any:
                def run(*args: Any) -> None:
                    try:
                        fn(*args)
                    except BaseException as exc:
                        errors.append(exc)
                return run

            @guarded
            def consume(name: str, stop_after: int | None) -> None:
                # batch-index acks: a redelivered batch carries only its unacked messages
                # Earliest: a consumer thread may subscribe after the producers' first sends
                # (a "latest" subscription created then would rightly never see them)
                c = client.subscribe(topic, "s", consumer_type=kind, consumer_name=name, batch_index_ack_enabled=True,
                                     negative_ack_redelivery_delay_ms=50, receiver_queue_size=50,
                                     initial_position=pulsar.InitialPosition.Earliest)
                seen = 0
                idle_since = time.monotonic()
                # Stop once everything is acked; a long silence (20 s) is a failure, not a
                # stall of a loaded machine.
                while not all_acked.is_set():
                    try:
                        m = c.receive(timeout_millis=200)
                    except pulsar.Timeout:
                        if time.monotonic() - idle_since > 20:
                            break
                        continue
                    idle_since = time.monotonic()
                    seen += 1
                    if stop_after is not None and seen >= stop_after:
                        c.close()  # unacked messages go to the others
                        return
                    if m.redelivery_count() < 2 and rng.random() < 0.1:
                        c.negative_acknowledge(m)
                        continue
                    c.acknowledge(m)
                    with lock:
                        acked.add(m.data())
                        if len(acked) == len(expected):
                            all_acked.set()
                c.close()

            consumers = [threading.Thread(target=consume, args=(f"c{i}", 40 if i == 0 else None)) for i in range(3)]
            for t in consumers:
                t.start()

            @guarded
            def produce(p: int) -> None:
                prod = client.create_producer(topic, batching_enabled=p % 2 == 0, batching_max_publish_delay_ms=5)
                for i in range(per_producer):
                    prod.send_async(f"p{p}-{i}".encode(), None, partition_key=f"k{i % 7}")
                prod.flush()

            producers = [threading.Thread(target=produce, args=(p,)) for p in range(n_producers)]
            for t in producers:
                t.start()
            for t in producers + consumers:
                t.join(60)
            assert not errors, errors
            assert acked == expected
        finally:
            client.close()

    await in_thread(work)
