"""Catch-up read benchmark: a consumer far behind vs one that is caught up (official client).

Against `quire standalone` (durable journal): one topic, a subscription created first, then
``--messages`` messages of 100 B published one entry per message (``--batched``: 1000 per
batch), so the per-entry costs of reading and dispatching show. Three phases,
each consuming the whole backlog with the same client settings:
  * caught up: a backlog small enough to sit in the broker's entry cache (``--cached``
    messages, read right after they were published);
  * catch-up: ``--messages`` (default 1,000,000) messages read after a restart of the
    standalone, so none is in the entry cache or the bookie's caches: every entry comes from
    the bookie's entry logs through range reads.
  * caught up again (another fresh topic) after the catch-up: the ratio is taken against the
    mean of both caught-up phases, since the load of a shared machine drifts during a run.
Prints msgs/s of the phases and the ratio (issue 17's goal: catch-up >= 0.8 x caught up), the
broker's CPU µs per message in each phase and their ratio (caught up / catch-up: what the
catch-up read path costs, less sensitive to the machine's load than the rates), and writes
bench/results/bench_catchup.json.

    .venv/bin/python bench/bench_catchup.py [--messages 1000000] [--cached 200000] [--py-spy DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_e2e import BATCH_RECEIVE_POLICY, PRODUCER_SETTINGS, cpu_seconds, profiled, start_standalone  # noqa: E402


def _standalone_at(root: Path) -> tuple:
    return start_standalone(root)


def publish(client, topic: str, n: int, size: int, batched: bool) -> float:  # type: ignore[no-untyped-def]
    import pulsar

    settings = dict(PRODUCER_SETTINGS)
    if not batched:  # one entry per message: the per-entry costs of reading and dispatching show
        settings.update(batching_enabled=False, max_pending_messages=1000)
    producer = client.create_producer(topic, compression_type=pulsar.CompressionType.NONE, **settings)
    payload = os.urandom(size)
    start = time.perf_counter()
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return n / elapsed


def consume(client, topic: str, n: int, server_pid: int) -> dict:  # type: ignore[no-untyped-def]
    import pulsar

    consumer = client.subscribe(topic, "catchup", receiver_queue_size=20_000,
                                initial_position=pulsar.InitialPosition.Earliest,
                                batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(*BATCH_RECEIVE_POLICY))
    got = 0
    cpu0 = cpu_seconds(server_pid)
    start = time.perf_counter()
    deadline = start + 600
    while got < n and time.perf_counter() < deadline:
        msgs = consumer.batch_receive()
        if msgs:
            got += len(msgs)
            consumer.acknowledge_cumulative(msgs[-1])
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(server_pid) - cpu0
    consumer.close()
    return {"messages": got, "seconds": elapsed, "msgs_per_s": got / elapsed, "server_cpu_us_per_msg": cpu / max(got, 1) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--cached", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batched", action="store_true", help="publish in batches of 1000 (default: one entry per message)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_catchup.json"))
    ap.add_argument("--py-spy", metavar="DIR", help="sample the standalone with py-spy in each consume phase (raw stacks in DIR)")
    args = ap.parse_args()
    import pulsar

    root = Path(tempfile.mkdtemp(prefix="bench-catchup-"))
    proc = None
    try:
        proc, port = _standalone_at(root)
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", io_threads=1, message_listener_threads=1)
        # caught up: a fresh subscription, the backlog published just now (in the entry cache)
        hot = f"persistent://public/default/catchup-hot-{time.time_ns()}"
        client.subscribe(hot, "catchup", initial_position=pulsar.InitialPosition.Earliest).close()
        publish(client, hot, args.cached, args.size, args.batched)
        with profiled(args.py_spy, proc.pid, "caught_up"):
            caught_up = consume(client, hot, args.cached, proc.pid)
        # far behind: the subscription exists, the backlog is large, then the broker restarts
        cold = f"persistent://public/default/catchup-cold-{time.time_ns()}"
        client.subscribe(cold, "catchup", initial_position=pulsar.InitialPosition.Earliest).close()
        publish_rate = publish(client, cold, args.messages, args.size, args.batched)
        client.close()
        proc.terminate()
        proc.wait(60)
        proc, port = _standalone_at(root)
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", io_threads=1, message_listener_threads=1)
        with profiled(args.py_spy, proc.pid, "catch_up"):
            catch_up = consume(client, cold, args.messages, proc.pid)
        # caught up again, after the catch-up: the machine's load drifts (shared hosts), so
        # the ratio is taken against the mean of a caught-up phase before and one after
        hot2 = f"persistent://public/default/catchup-hot2-{time.time_ns()}"
        client.subscribe(hot2, "catchup", initial_position=pulsar.InitialPosition.Earliest).close()
        publish(client, hot2, args.cached, args.size, args.batched)
        caught_up_after = consume(client, hot2, args.cached, proc.pid)
        client.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(root, ignore_errors=True)
    hot_rate = (caught_up["msgs_per_s"] + caught_up_after["msgs_per_s"]) / 2
    hot_cpu = (caught_up["server_cpu_us_per_msg"] + caught_up_after["server_cpu_us_per_msg"]) / 2
    ratio = catch_up["msgs_per_s"] / hot_rate
    # the server's CPU per message, caught up / catching up: what the catch-up read path adds,
    # far less sensitive to the machine's load than the rates
    cpu_ratio = hot_cpu / max(catch_up["server_cpu_us_per_msg"], 1e-9)
    result = {"size": args.size, "batched": args.batched, "publish_msgs_per_s": publish_rate, "caught_up": caught_up,
              "catch_up": catch_up, "caught_up_after": caught_up_after, "ratio": ratio, "cpu_ratio": cpu_ratio,
              "goal_ratio": 0.8, "load_avg": os.getloadavg()}
    print(f"caught up: {caught_up['msgs_per_s']:,.0f} then {caught_up_after['msgs_per_s']:,.0f} msg/s ({hot_cpu:.1f} us/msg server) | "
          f"catch-up of {catch_up['messages']:,}: {catch_up['msgs_per_s']:,.0f} msg/s "
          f"({catch_up['server_cpu_us_per_msg']:.1f} us/msg server) | ratio {ratio:.2f} (goal >= 0.80), "
          f"server CPU ratio {cpu_ratio:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
