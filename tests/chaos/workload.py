"""Producers, consumers, drains and a cursor watcher, on threads, with both client libraries.

The official `pulsar` package and our `clients` package have the same blocking API, so a
worker takes a `Lib` (module + client) and does not care which one it drives. Every loop
checks a stop event at least every half second; every blocking client call has a timeout.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pulsar

import clients
from tests.chaos.history import ACKED, FAILED, PENDING, UNKNOWN, History, MessageKey, Send, \
    SubscriptionSpec, encode_payload

log = logging.getLogger(__name__)

OPERATION_TIMEOUT_S = 10
SEND_TIMEOUT_MS = 15000
WINDOW = 100  # outstanding send_async per producer


@dataclass
class Lib:
    """One client library and one client of it (shared by that library's workers)."""

    name: str  # "official" | "quire"
    module: Any
    client: Any

    @classmethod
    def open(cls, name: str, service_url: str, log_path: str) -> Lib:
        if name == "official":
            client = pulsar.Client(service_url, operation_timeout_seconds=OPERATION_TIMEOUT_S,
                                   logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn, log_path))
            return cls(name, pulsar, client)
        return cls(name, clients, clients.Client(service_url, operation_timeout_seconds=OPERATION_TIMEOUT_S))

    def consumer_type(self, sub_type: str) -> Any:
        return getattr(self.module.ConsumerType, "KeyShared" if sub_type == "Key_Shared" else sub_type)

    def close(self) -> None:
        close_within(self.client, self.name, 15)


def close_within(obj: Any, name: str, timeout: float) -> None:
    """`obj.close()` on a helper thread, waited for `timeout` at most (a close may hang while
    a broker is down); a failure changes nothing after a run and is only logged."""
    def close() -> None:
        try:
            obj.close()
        except Exception:  # noqa: BLE001
            log.debug("%s: close failed", name, exc_info=True)
    closer = threading.Thread(target=close, name=f"close-{name}", daemon=True)
    closer.start()
    closer.join(timeout)


def message_key(msg: Any) -> MessageKey:
    mid = msg.message_id()
    return (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index())


def partition_names(topic: str, partitions: int) -> list[str]:
    return [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]


@dataclass
class ProducerWorker:
    """Sends `encode_payload(name, seq, key)` at about `rate` per second, `WINDOW` at a time."""

    lib: Lib
    topic: str
    name: str
    history: History
    batching: bool
    keys: list[str] = field(default_factory=list)
    rate: float = 20.0
    seed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    create_errors: int = 0

    def __post_init__(self) -> None:
        self._room = threading.Semaphore(WINDOW)
        self._thread = threading.Thread(target=self._main, name=f"producer-{self.name}", daemon=True)
        self._rng = random.Random(f"{self.seed}-{self.name}")
        self._producer: Any = None

    def start(self) -> None:
        self._thread.start()

    def _create(self) -> Any:
        kwargs: dict[str, Any] = dict(producer_name=self.name, send_timeout_millis=SEND_TIMEOUT_MS,
                                      batching_enabled=self.batching, max_pending_messages=WINDOW * 2,
                                      block_if_queue_full=False)
        if self.batching:
            kwargs["batching_max_publish_delay_ms"] = 5
            if self.keys:
                kwargs["batching_type"] = self.lib.module.BatchingType.KeyBased
        while not self.stop.is_set():
            try:
                return self.lib.client.create_producer(self.topic, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a fault is going on: try again
                self.create_errors += 1
                log.info("%s: create_producer failed: %s", self.name, exc)
                self.stop.wait(0.5)
        return None

    def _main(self) -> None:
        self._producer = self._create()
        if self._producer is None:
            return
        seq = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop.is_set():
            if not self._room.acquire(timeout=0.5):
                continue
            key = self._rng.choice(self.keys) if self.keys else None
            data = encode_payload(self.name, seq, key)
            send = self.history.begin_send(self.topic, self.name, seq, key, data)
            seq += 1
            try:
                self._producer.send_async(data, self._callback(send), partition_key=key)
            except Exception as exc:  # noqa: BLE001 - refused before it left: a definite failure
                self._room.release()
                self.history.finish_send(send, FAILED, error=repr(exc)[:200])
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_at = time.monotonic()

    def _callback(self, send: Send) -> Any:
        ok = self.lib.module.Result.Ok

        def done(result: Any, msg_id: Any) -> None:
            try:
                if result == ok:
                    self.history.finish_send(send, ACKED, (msg_id.partition(), msg_id.ledger_id(),
                                                           msg_id.entry_id(), msg_id.batch_index()))
                else:  # a timeout or a lost connection: the broker may have stored it
                    self.history.finish_send(send, UNKNOWN, error=str(result))
            finally:
                self._room.release()
        return done

    def finish(self, settle_s: float) -> None:
        """Stop sending, wait up to `settle_s` for the outstanding sends' outcomes, close."""
        self.stop.set()
        self._thread.join(timeout=OPERATION_TIMEOUT_S * 3)
        deadline = time.monotonic() + settle_s
        got = 0
        while got < WINDOW and time.monotonic() < deadline:
            if self._room.acquire(timeout=0.2):
                got += 1
        if self._producer is not None:
            close_within(self._producer, self.name, OPERATION_TIMEOUT_S + 5)


@dataclass
class ConsumerWorker:
    """Receives and acknowledges every message of one subscription (one consumer of it)."""

    lib: Lib
    spec: SubscriptionSpec
    name: str
    history: History
    stop: threading.Event = field(default_factory=threading.Event)
    drain: bool = False
    errors: int = 0
    received: int = 0
    last_receive: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"consumer-{self.name}", daemon=True)
        self._consumer: Any = None

    def start(self) -> None:
        self._thread.start()

    def subscribe(self) -> Any:
        while not self.stop.is_set():
            try:
                self._consumer = self.lib.client.subscribe(
                    self.spec.topic, self.spec.name, consumer_type=self.lib.consumer_type(self.spec.type),
                    consumer_name=self.name, initial_position=self.lib.module.InitialPosition.Earliest,
                    receiver_queue_size=100)
                return self._consumer
            except Exception as exc:  # noqa: BLE001 - a fault is going on: try again
                self.errors += 1
                log.info("%s: subscribe failed: %s", self.name, exc)
                self.stop.wait(0.5)
        return None

    def _main(self) -> None:
        if self._consumer is None and self.subscribe() is None:
            return
        while not self.stop.is_set():
            try:
                msg = self._consumer.receive(timeout_millis=500)
            except self.lib.module.Timeout:
                continue
            except Exception:  # noqa: BLE001 - closed or disconnected: keep trying until stopped
                self.errors += 1
                self.stop.wait(0.2)
                continue
            self.received += 1
            self.last_receive = time.monotonic()
            self.history.deliver(self.spec.topic, msg.topic_name(), self.spec.name, self.name, msg.data(),
                                 message_key(msg), drain=self.drain)
            try:
                self._consumer.acknowledge(msg)
            except Exception:  # noqa: BLE001 - the ack is lost: the message comes again
                self.errors += 1

    def finish(self) -> None:
        self.stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=OPERATION_TIMEOUT_S)
        if self._consumer is not None:
            close_within(self._consumer, self.name, OPERATION_TIMEOUT_S + 5)


DRAIN_STALL_S = 45.0  # a drain that receives nothing this long while sends are missing gives up


def drain(lib: Lib, spec: SubscriptionSpec, history: History, quiet_s: float, max_s: float,
          stall_s: float = DRAIN_STALL_S) -> int:
    """Receive the rest of a subscription with one new consumer: until every acknowledged send
    was received and `quiet_s` passed without a message (redeliveries may still come), or
    nothing arrived for `stall_s` while sends are still missing (they are lost), or `max_s` at
    most. A long run's unread audit backlog takes minutes to read: the drain goes on while it
    makes progress, so a slow drain is not reported as loss. Returns how many it received."""
    worker = ConsumerWorker(lib, spec, f"{spec.name}-drain", history, drain=True)
    deadline = time.monotonic() + max_s
    timer = threading.Timer(max_s, worker.stop.set)  # subscribe retries end with the drain too
    timer.start()
    try:
        if worker.subscribe() is None:
            return 0
        worker.last_receive = time.monotonic()
        worker.start()
        missing = history.missing(spec.topic, spec.name)
        while time.monotonic() < deadline:
            missing = history.missing(spec.topic, spec.name, missing)
            idle = time.monotonic() - worker.last_receive
            if (idle >= quiet_s and not missing) or idle >= stall_s:
                break
            time.sleep(0.5)
    finally:
        timer.cancel()
        worker.finish()
    return worker.received


class CursorWatcher:
    """Polls each subscription's mark-delete position (internalStats) into the history."""

    def __init__(self, admin: Any, specs: list[SubscriptionSpec], history: History, every_s: float = 2.0) -> None:
        self.admin = admin  # Topology.admin
        self.specs = specs
        self.history = history
        self.every_s = every_s
        self.stop = threading.Event()
        self.errors = 0
        self._thread = threading.Thread(target=self._main, name="cursor-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        while not self.stop.wait(self.every_s):
            for spec in self.specs:
                for part in partition_names(spec.topic, spec.partitions):
                    if self.stop.is_set():
                        return
                    self.poll(part, spec.name)

    def poll(self, partition: str, sub: str) -> None:
        try:
            r = self.admin("GET", "/admin/v2/" + partition.replace("://", "/", 1) + "/internalStats", timeout=3)
            if r.status_code != 200:
                return
            pos = r.json()["cursors"][sub]["markDeletePosition"]
            ledger, entry = (int(x) for x in pos.split(":"))
        except Exception:  # noqa: BLE001 - a broker is down or the topic moving: skip this round
            self.errors += 1
            return
        self.history.cursor(partition, sub, (ledger, entry))

    def finish(self) -> None:
        self.stop.set()
        self._thread.join(timeout=15)


def settle_pending(history: History) -> int:
    """Sends still without an outcome once their producers closed: unknown. Returns how many."""
    n = 0
    for s in list(history.sends):
        if s.outcome == PENDING:
            history.finish_send(s, UNKNOWN, error="no outcome before the end of the run")
            n += 1
    return n
