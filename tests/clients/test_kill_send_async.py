"""A blocking ``send_async`` producer keeps working after its broker is SIGKILLed and restarted.

The scenario of a 30-minute chaos run in which a ``clients/`` producer with ``send_async``
messages in flight when its broker was killed timed out every later send until the end of the
run. This end-to-end run does not hit that race (its connection dying between PRODUCER_SUCCESS
and the re-send of the pending frames) reliably: the ``*_dies_right_after_*`` tests in
test_wire_behaviour.py reproduce it deterministically.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from clients import Client, Result
from tests.clients.conftest import start_broker, wait_for_default_namespace

RATE = 15.0  # msg/s, as the chaos workload


def test_send_async_producer_recovers_after_broker_sigkill(tmp_path: Path) -> None:
    node = start_broker(tmp_path)
    client = Client(node.url, operation_timeout_seconds=10)
    results: list[tuple[float, object]] = []
    lock = threading.Lock()
    stop = threading.Event()
    try:
        producer = client.create_producer(
            "persistent://public/default/kill-send-async", producer_name="kill-p1",
            send_timeout_millis=5000, max_pending_messages=200, block_if_queue_full=False,
            batching_enabled=True, batching_max_publish_delay_ms=5,
        )

        def done(result: object, _mid: object, sent: float) -> None:
            with lock:
                results.append((sent, result))

        def produce() -> None:
            i = 0
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    producer.send_async(b"m%d" % i, lambda r, m, s=sent: done(r, m, s))
                except Exception:  # noqa: BLE001 - queue full while the broker is away
                    pass
                i += 1
                stop.wait(1 / RATE)

        worker = threading.Thread(target=produce, daemon=True)
        worker.start()
        time.sleep(2)
        node.proc.kill()
        time.sleep(1)
        node.proc.start()
        node.proc.wait_ready(60)
        wait_for_default_namespace(node.web_port)
        restarted = time.monotonic()
        # The producer must get its sends acknowledged again soon after the broker is back.
        deadline = restarted + 40
        while time.monotonic() < deadline:
            with lock:
                if sum(1 for s, r in results if s > restarted + 2 and r == Result.Ok) >= 20:
                    break
            time.sleep(0.2)
        stop.set()
        worker.join(5)
        with lock:
            later = [r for s, r in results if s > restarted + 2]
        assert sum(1 for r in later if r == Result.Ok) >= 20, (
            f"after the restart: {len(later)} settled, results {sorted(set(map(str, later)))}")
        client.close()
    finally:
        stop.set()
        node.proc.terminate()
