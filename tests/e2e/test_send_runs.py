"""Runs of SENDs that one socket read brings (the broker reader writes their journal group at
the end of the run, quire/input_batch.py), against a real ``quire standalone`` whose
connections take at most 2 pending publishes: a SEND that waits for room ends the run first,
so the SENDs before it are written and the wait ends. Every message acknowledged is stored,
in order."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pulsar
import pytest

from tests.e2e.conftest import Standalone, start_standalone


@pytest.fixture(scope="module")
def tight_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    node = start_standalone(Path(tmp_path_factory.mktemp("send-runs")), "--set",
                            "max_pending_publish_requests_per_connection=2")
    try:
        yield node
    finally:
        node.proc.terminate()
        print(node.proc.log_tail(30))


def test_send_runs_at_the_pending_publish_limit_are_all_stored_in_order(tight_standalone: Standalone) -> None:
    client = tight_standalone.client()
    try:
        topics = [f"persistent://public/default/runs-{uuid.uuid4().hex[:8]}" for _ in range(2)]
        consumers = [client.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest) for t in topics]
        producers = [client.create_producer(t, batching_enabled=False, max_pending_messages=500) for t in topics]
        n = 400
        acked: list[list[int]] = [[], []]
        for i in range(n):
            for k, p in enumerate(producers):
                p.send_async(f"{k}-{i}".encode(), lambda res, mid, k=k, i=i: acked[k].append(i)
                             if res == pulsar.Result.Ok else None)
        for p in producers:
            p.flush()
        deadline = time.monotonic() + 30  # the client runs the last callbacks on its own thread
        while any(len(a) < n for a in acked) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert acked == [list(range(n)), list(range(n))]  # every send acknowledged, in order
        for k, c in enumerate(consumers):
            got = []
            for _ in range(n):
                m = c.receive(timeout_millis=10_000)
                got.append(m.data().decode())
                c.acknowledge(m)
            assert got == [f"{k}-{i}" for i in range(n)]
    finally:
        client.close()
