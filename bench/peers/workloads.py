"""The three workloads of the peer comparison, one implementation per system and client.

Run as a worker subprocess by ``bench/peers/run.py`` (one fresh process per measurement, so the
clients never share an interpreter)::

    python -m bench.peers.workloads SYSTEM WORKLOAD --address A --stream S --size N --messages N

and prints one JSON line. Workloads (the same for every system):

* ``latency``: publish one message at a time, each waiting for the server's acknowledgement;
  the result holds every latency in microseconds (for the CDF) and msg/s.
* ``produce``: publish ``messages`` with at most ``window`` (1,000) unacknowledged; msg/s.
* ``consume``: one consumer reads ``messages`` back from the start of the stream that
  ``produce`` filled (acknowledging where the system has acknowledgements); msg/s.

Each system uses its usual Python client: ``pulsar-client`` (official) and ``clients``
(quire's, the same code through ``import clients as pulsar``) for quire, ``redis`` for Redis
Streams, ``rstream`` for RabbitMQ streams, ``nats-py`` for NATS JetStream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

Result = dict[str, Any]


def _payload(size: int) -> bytes:
    return (b"0123456789abcdef" * (size // 16 + 1))[:size]


def _per(cpu_s: float, n: int) -> float:
    """Client process CPU time (all its threads) per message, in µs."""
    return round(cpu_s / n * 1e6, 1) if n else 0.0


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def _time_each(send: Callable[[], Any], messages: int) -> Result:
    """One-at-a-time publishes: every latency (µs), msg/s and client CPU per message."""
    lat = []
    cpu0 = time.process_time()
    for _ in range(messages):
        t0 = time.perf_counter()
        send()
        lat.append((time.perf_counter() - t0) * 1e6)
    cpu = time.process_time() - cpu0
    return {"msg_per_s": _rate(messages, sum(lat) / 1e6), "latencies_us": lat, "cpu_us_per_msg": _per(cpu, messages)}


async def _atime_each(send: Callable[[], Awaitable[Any]], messages: int) -> Result:
    """``_time_each`` for async clients."""
    lat = []
    cpu0 = time.process_time()
    for _ in range(messages):
        t0 = time.perf_counter()
        await send()
        lat.append((time.perf_counter() - t0) * 1e6)
    cpu = time.process_time() - cpu0
    return {"msg_per_s": _rate(messages, sum(lat) / 1e6), "latencies_us": lat, "cpu_us_per_msg": _per(cpu, messages)}


# -- quire: the official client and ours, through the same (official) API -----------------------


def _pulsar_module(client: str) -> Any:
    if client == "official":
        import pulsar
    else:
        import clients as pulsar
    return pulsar


def quire_workload(client: str, workload: str, url: str, topic: str, size: int, messages: int, window: int) -> Result:
    pulsar = _pulsar_module(client)
    c = pulsar.Client(url)
    try:
        data = _payload(size)
        if workload == "latency":
            # Unbatched: a batching producer holds a lone message for the batch delay.
            p = c.create_producer(topic, batching_enabled=False)
            result = _time_each(lambda: p.send(data), messages)
            p.close()
            return result
        if workload == "produce":
            p = c.create_producer(
                topic, batching_enabled=True, max_pending_messages=window, block_if_queue_full=True,
            )
            done = threading.Event()
            failed: list[Any] = []
            acked = 0

            def callback(res: Any, _mid: Any) -> None:
                nonlocal acked
                if res != pulsar.Result.Ok:
                    failed.append(res)
                acked += 1
                if acked == messages:
                    done.set()

            t0, cpu0 = time.perf_counter(), time.process_time()
            send_async = p.send_async
            for _ in range(messages):
                send_async(data, callback)
            p.flush()
            done.wait(120)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            p.close()
            if failed or acked != messages:
                raise RuntimeError(f"{len(failed)} sends failed, {acked} of {messages} acknowledged")
            return {"msg_per_s": _rate(messages, elapsed), "cpu_us_per_msg": _per(cpu, messages)}
        if workload == "consume":
            cons = c.subscribe(topic, "peers-bench", initial_position=pulsar.InitialPosition.Earliest,
                               receiver_queue_size=window)
            receive, ack = cons.receive, cons.acknowledge
            msg = receive(30_000)  # the first message starts the clock (after subscribe + first fetch)
            ack(msg)
            t0, cpu0 = time.perf_counter(), time.process_time()
            for _ in range(messages - 1):
                ack(receive(30_000))
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            cons.close()
            return {"msg_per_s": _rate(messages - 1, elapsed), "cpu_us_per_msg": _per(cpu, messages - 1)}
        raise ValueError(workload)
    finally:
        c.close()


async def _quire_async(workload: str, url: str, topic: str, size: int, messages: int, window: int) -> Result:
    """The same workloads through ``clients``' trio API (the reference the blocking API is held to)."""
    from clients import AsyncClient, InitialPosition

    data = _payload(size)
    async with AsyncClient(url) as c:
        if workload == "latency":
            p = await c.create_producer(topic, batching_enabled=False)
            result = await _atime_each(lambda: p.send(data), messages)
            await p.close()
            return result
        if workload == "produce":
            p = await c.create_producer(topic, batching_enabled=True, max_pending_messages=window,
                                        block_if_queue_full=True)
            failed = 0

            def callback(error: Any, _mid: Any) -> None:
                nonlocal failed
                failed += error is not None

            t0, cpu0 = time.perf_counter(), time.process_time()
            for _ in range(messages):
                await p.send_async(data, callback)
            await p.flush()
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            await p.close()
            if failed:
                raise RuntimeError(f"{failed} sends failed")
            return {"msg_per_s": _rate(messages, elapsed), "cpu_us_per_msg": _per(cpu, messages)}
        if workload == "consume":
            cons = await c.subscribe(topic, "peers-bench", initial_position=InitialPosition.Earliest,
                                     receiver_queue_size=window)
            await cons.acknowledge(await cons.receive(30_000))
            t0, cpu0 = time.perf_counter(), time.process_time()
            for _ in range(messages - 1):
                await cons.acknowledge(await cons.receive(30_000))
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            await cons.close()
            return {"msg_per_s": _rate(messages - 1, elapsed), "cpu_us_per_msg": _per(cpu, messages - 1)}
    raise ValueError(workload)


def quire_batch_api(workload: str, url: str, topic: str, size: int, messages: int, window: int) -> Result:
    """``clients``' blocking batch API: ``send_many`` of ``window`` messages at a time (so at
    most ``window`` unacknowledged), ``receive_many`` of up to ``window``. No latency workload
    (a batch call is not a one-at-a-time publish)."""
    import clients

    c = clients.Client(url)
    try:
        data = _payload(size)
        if workload == "produce":
            p = c.create_producer(topic, batching_enabled=True, max_pending_messages=window)
            t0, cpu0 = time.perf_counter(), time.process_time()
            left = messages
            while left:
                n = min(window, left)
                p.send_many([data] * n)
                left -= n
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            p.close()
            return {"msg_per_s": _rate(messages, elapsed), "cpu_us_per_msg": _per(cpu, messages)}
        if workload == "consume":
            cons = c.subscribe(topic, "peers-bench", initial_position=clients.InitialPosition.Earliest,
                               receiver_queue_size=window)
            got = cons.receive_many(1, 30_000)
            cons.acknowledge(got[0])
            t0, cpu0 = time.perf_counter(), time.process_time()
            n, ack = 1, cons.acknowledge
            while n < messages:
                batch = cons.receive_many(min(window, messages - n), 30_000)
                for msg in batch:
                    ack(msg)
                n += len(batch)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            cons.close()
            return {"msg_per_s": _rate(messages - 1, elapsed), "cpu_us_per_msg": _per(cpu, messages - 1)}
        raise ValueError(workload)
    finally:
        c.close()


# -- Redis Streams ---------------------------------------------------------------------------------


def redis_workload(workload: str, address: str, stream: str, size: int, messages: int, window: int) -> Result:
    import redis

    host, port = address.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    data = {b"d": _payload(size)}
    if workload == "latency":
        return _time_each(lambda: r.xadd(stream, data), messages)
    if workload == "produce":
        # Pipelines of `window` XADDs: at most `window` unacknowledged (the replies are the acks).
        t0 = time.perf_counter()
        left = messages
        while left:
            n = min(window, left)
            pipe = r.pipeline(transaction=False)
            for _ in range(n):
                pipe.xadd(stream, data)
            pipe.execute()
            left -= n
        return {"msg_per_s": _rate(messages, time.perf_counter() - t0)}
    if workload == "consume":
        # XREAD in pages of `window` from the start (streams have no per-message ack outside groups).
        t0 = time.perf_counter()
        last, got = b"0-0", 0
        while got < messages:
            reply = r.xread({stream: last}, count=window, block=30_000)
            if not reply:
                raise RuntimeError(f"redis: stream ran dry after {got} messages")
            entries = reply[0][1]
            got += len(entries)
            last = entries[-1][0]
        return {"msg_per_s": _rate(got, time.perf_counter() - t0)}
    raise ValueError(workload)


# -- RabbitMQ streams (rstream, the stream protocol on port 5552) --------------------------------


async def _rabbit(workload: str, address: str, stream: str, size: int, messages: int, window: int) -> Result:
    from rstream import ConfirmationStatus, Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    host, port = address.rsplit(":", 1)
    data = _payload(size)
    if workload in ("latency", "produce"):
        async with Producer(host, port=int(port), username="guest", password="guest") as producer:
            await producer.create_stream(stream, exists_ok=True)
            if workload == "latency":
                return await _atime_each(lambda: producer.send_wait(stream, data), messages)
            # rstream's send() buffers for up to 0.5 s; send_batch() publishes at once. Batches of
            # `chunk` go out while fewer than `window` are unconfirmed (a sliding window).
            chunk = max(1, window // 10)
            room = asyncio.Semaphore(window // chunk)
            all_done = asyncio.Event()
            acked = failed = 0
            batch = [data] * chunk

            async def confirmed(status: ConfirmationStatus) -> None:
                nonlocal acked, failed
                acked += 1
                failed += not status.is_confirmed
                if acked % chunk == 0 or acked == messages:
                    room.release()
                if acked == messages:
                    all_done.set()

            t0 = time.perf_counter()
            left = messages
            while left:
                n = min(chunk, left)
                await room.acquire()
                await producer.send_batch(stream, batch[:n], on_publish_confirm=confirmed)
                left -= n
            await asyncio.wait_for(all_done.wait(), 120)
            elapsed = time.perf_counter() - t0
            if failed:
                raise RuntimeError(f"rabbitmq: {failed} publishes not confirmed")
            return {"msg_per_s": _rate(messages, elapsed)}
    if workload == "consume":
        got = 0
        done = asyncio.Event()
        t0 = 0.0

        async def on_message(_msg: Any, _ctx: Any) -> None:
            nonlocal got, t0
            if got == 0:
                t0 = time.perf_counter()
            got += 1
            if got == messages:
                done.set()

        async with Consumer(host, port=int(port), username="guest", password="guest") as consumer:
            await consumer.start()
            await consumer.subscribe(stream, on_message, initial_credit=window // 10 or 1,
                                     offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
            await asyncio.wait_for(done.wait(), 120)
            return {"msg_per_s": _rate(messages - 1, time.perf_counter() - t0)}
    raise ValueError(workload)


# -- NATS JetStream ------------------------------------------------------------------------------


async def _nats(workload: str, address: str, stream: str, size: int, messages: int, window: int) -> Result:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

    nc = await nats.connect(f"nats://{address}")
    try:
        js = nc.jetstream(publish_async_max_pending=window)
        subject = f"{stream}.data"
        data = _payload(size)
        if workload in ("latency", "produce"):
            await js.add_stream(name=stream, subjects=[f"{stream}.>"], storage=StorageType.FILE)
        if workload == "latency":
            return await _atime_each(lambda: js.publish(subject, data), messages)
        if workload == "produce":
            # publish_async: at most `window` unacknowledged (the context's pending semaphore).
            failed = 0

            def settled(fut: asyncio.Future[Any]) -> None:
                nonlocal failed
                failed += fut.cancelled() or fut.exception() is not None

            t0 = time.perf_counter()
            for _ in range(messages):
                fut = await js.publish_async(subject, data)
                fut.add_done_callback(settled)
            await asyncio.wait_for(js.publish_async_completed(), 120)
            elapsed = time.perf_counter() - t0
            if failed:
                raise RuntimeError(f"nats: {failed} publishes failed")
            return {"msg_per_s": _rate(messages, elapsed)}
        if workload == "consume":
            sub = await js.pull_subscribe(
                subject, durable="peers-bench",
                config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
            )
            got = 0
            t0 = time.perf_counter()
            while got < messages:
                batch = await sub.fetch(min(window, messages - got), timeout=30)
                got += len(batch)
            return {"msg_per_s": _rate(got, time.perf_counter() - t0)}
        raise ValueError(workload)
    finally:
        await nc.close()


def _trio_run(*args: Any) -> Result:
    import trio

    return trio.run(_quire_async, *args)


RUNNERS: dict[str, Callable[..., Result]] = {
    "quire-official": lambda *a: quire_workload("official", *a),
    "quire-clients": lambda *a: quire_workload("clients", *a),
    "quire-clients-async": _trio_run,
    "quire-clients-batch": quire_batch_api,
    "redis": redis_workload,
    "rabbitmq": lambda *a: asyncio.run(_rabbit(*a)),
    "nats": lambda *a: asyncio.run(_nats(*a)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system", choices=sorted(RUNNERS))
    parser.add_argument("workload", choices=("latency", "produce", "consume"))
    parser.add_argument("--address", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=1000)
    a = parser.parse_args()
    t_cpu = time.process_time()
    result = RUNNERS[a.system](a.workload, a.address, a.stream, a.size, a.messages, a.window)
    result["client_cpu_s"] = round(time.process_time() - t_cpu, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
