"""Zombie-proof bundle handoff on a real cluster (ZooKeeper, bookie and broker processes, the
official client).

- An owner paused (SIGSTOP) past its metadata session: another broker takes the topic over
  and produces; once resumed the old owner acknowledges nothing more and answers lookups with
  the new owner; readers through either broker see one history holding every acknowledged
  message.
- A broker cut off from ZooKeeper (ZooKeeper SIGSTOPped) stops acknowledging publishes within
  its session timeout (ZooKeeper tells it the session expired only once it can reach it again,
  by when another broker may own its bundles), and serves again once ZooKeeper is back.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pulsar

from tests.e2e.conftest import new_client, start_bookie, start_broker
from tests.fixtures.processes import QuireProcesses
from tests.fixtures.zookeeper import ZooKeeperServer

SESSION_MS = 4000


def _owner_url(web: int, topic: str) -> str | None:
    """The topic's owner as ``web``'s broker answers a lookup; None while it refuses (503: it
    lost its metadata session and has not re-acquired anything yet)."""
    name = topic.rsplit("/", 1)[1]
    r = httpx.get(f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/default/{name}",
                  follow_redirects=True, timeout=60)
    if r.status_code == 503:
        return None
    assert r.status_code == 200, r.text
    return str(r.json()["brokerUrl"])


def _history(url: str, topic: str) -> list[bytes]:
    client = new_client(url, operation_timeout_seconds=60)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(timeout_millis=15000).data())
        return out
    finally:
        client.close()


class AsyncSends:
    """send_async with the outcome of each message recorded by its callback."""

    def __init__(self) -> None:
        self.acked: dict[bytes, float] = {}
        self.failed: dict[bytes, str] = {}
        self.lock = threading.Lock()

    def send(self, producer: pulsar.Producer, data: bytes) -> None:
        def done(result: Any, _msg_id: Any) -> None:
            with self.lock:
                if result == pulsar.Result.Ok:
                    self.acked[data] = time.monotonic()
                else:
                    self.failed[data] = str(result)
        producer.send_async(data, done)

    def settled(self, n: int) -> bool:
        with self.lock:
            return len(self.acked) + len(self.failed) >= n


def test_a_paused_owner_past_its_session_acknowledges_nothing_more(quire_procs: QuireProcesses, zk_url: str,
                                                                     tmp_path: Path) -> None:
    for i in range(3):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    brokers = [start_broker(quire_procs, zk_url, SESSION_MS) for _ in range(2)]
    procs = quire_procs.procs[-2:]
    topic = "persistent://public/default/zombie"
    owner_url = _owner_url(brokers[0][1], topic)
    assert owner_url is not None
    a = next(i for i, (p, _) in enumerate(brokers) if owner_url.endswith(f":{p}"))
    b = 1 - a
    (pa, wa), (pb, wb) = brokers[a], brokers[b]
    ca = new_client(f"pulsar://127.0.0.1:{pa}", operation_timeout_seconds=60)
    cb = new_client(f"pulsar://127.0.0.1:{pb}", operation_timeout_seconds=60)
    try:
        ca.subscribe(topic, "keep").close()  # a durable subscription: retention keeps the history
        producer_a = ca.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
        for i in range(20):
            producer_a.send(f"a{i}".encode())
        procs[a].pause()
        sends = AsyncSends()
        for i in range(10):  # sit in the paused owner's socket
            sends.send(producer_a, f"late{i}".encode())
        time.sleep(SESSION_MS / 1000 + 2)  # past the session: ZooKeeper expires it
        producer_b = cb.create_producer(topic, batching_enabled=False)  # B takes over (fences)
        for i in range(20):
            producer_b.send(f"b{i}".encode())
        resumed_at = time.monotonic()
        procs[a].resume()
        # The old owner gives the bundle up at once and redirects lookups to the new owner.
        deadline = time.monotonic() + 30
        while _owner_url(wa, topic) != f"pulsar://127.0.0.1:{pb}":
            assert time.monotonic() < deadline, "the resumed broker still claims the topic"
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while not sends.settled(10) and time.monotonic() < deadline:
            time.sleep(0.2)
        history_b = _history(f"pulsar://127.0.0.1:{pb}", topic)
        history_a = _history(f"pulsar://127.0.0.1:{pa}", topic)  # redirected to the owner
        assert history_a == history_b  # one history, whichever broker is asked
        assert history_b[:20] == [f"a{i}".encode() for i in range(20)]
        assert [m for m in history_b if m.startswith(b"b")] == [f"b{i}".encode() for i in range(20)]
        # Every acknowledged late message is in that history (the client re-sent them to the
        # new owner after the old one closed its connection); none was acked and dropped.
        assert set(sends.acked) <= set(history_b)
        stats = httpx.get(f"http://127.0.0.1:{wb}/admin/v2/persistent/public/default/zombie/stats").json()
        assert stats["ownerBroker"].endswith(f":{wb}")
        log = procs[a].log_text()
        assert "metadata session lost" in log or "giving up every bundle" in log
        del resumed_at
    finally:
        for c in (ca, cb):
            try:
                c.close()
            except pulsar.PulsarException:
                pass


def test_a_broker_cut_off_from_zookeeper_stops_serving_within_the_session_timeout(
        quire_procs: QuireProcesses, tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk:  # its own server: this test freezes it
        zk.ensure_path("/cut")
        url = zk.url("/cut")
        for i in range(2):
            start_bookie(quire_procs, url, tmp_path, i)
        port, web = start_broker(quire_procs, url, SESSION_MS)
        topic = "persistent://public/default/cut-off"
        client = new_client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=60)
        client.subscribe(topic, "keep").close()  # a durable subscription: retention keeps the history
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0,
                                          max_pending_messages=100000)
        sends = AsyncSends()
        stop = threading.Event()
        sent = [0]

        def pump() -> None:
            while not stop.is_set():
                sends.send(producer, f"m{sent[0]}".encode())
                sent[0] += 1
                time.sleep(0.02)

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        try:
            time.sleep(1.5)
            assert sends.acked, "nothing acknowledged before ZooKeeper was paused"
            paused_at = time.monotonic()
            zk.pause()
            try:
                time.sleep(SESSION_MS / 1000 * 2.5)
            finally:
                resumed_at = time.monotonic()
                zk.resume()
            # Slack for a loaded machine: the broker must have stopped well before ZooKeeper
            # came back (without the watchdog it acknowledged all along).
            limit = paused_at + SESSION_MS / 1000 + 2.0
            with sends.lock:
                late = [t - paused_at for t in sends.acked.values() if limit < t < resumed_at]
            assert not late, f"acknowledged {len(late)} publishes {min(late):.1f}-{max(late):.1f} s after ZooKeeper paused"
            # ZooKeeper is back: the broker serves again and nothing acknowledged was lost.
            deadline = time.monotonic() + 60
            count = len(sends.acked)
            while len(sends.acked) < count + 20:
                assert time.monotonic() < deadline, "publishing did not resume after ZooKeeper came back"
                time.sleep(0.2)
        finally:
            stop.set()
            thread.join(10)
        deadline = time.monotonic() + 60
        while not sends.settled(sent[0]) and time.monotonic() < deadline:
            time.sleep(0.2)
        client.close()
        history = _history(f"pulsar://127.0.0.1:{port}", topic)
        assert set(sends.acked) <= set(history)
        assert "giving up every bundle" in quire_procs.procs[-1].log_text()
