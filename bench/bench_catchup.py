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

    .venv/bin/python bench/bench_catchup.py [--messages 1000000] [--cached 200000] [--py-spy DIR] [--strace DIR]
    # paired A/B: the standalones of both checkouts in interleaved rounds (A B A B ...)
    .venv/bin/python bench/bench_catchup.py --repo /work/wt/base --repo . --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_e2e import BATCH_RECEIVE_POLICY, PRODUCER_SETTINGS, attached, cpu_seconds, profiled, start_standalone  # noqa: E402


def _standalone_at(root: Path, repo: Path | None = None) -> tuple:
    if repo is None:
        return start_standalone(root)
    return start_standalone(root, repo, {})  # that checkout's code on PYTHONPATH


def straced(out_dir: str | None, pid: int, phase: str) -> AbstractContextManager[None]:
    """With ``--strace DIR``: count the standalone's system calls (all threads) in one phase
    (strace slows the process down: for counts per message, not for rates)."""
    if not out_dir:
        return attached(None)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return attached(["strace", "-c", "-f", "-p", str(pid), "-o", str(Path(out_dir) / f"{phase}.txt")])


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


def run_once(args: argparse.Namespace, repo: Path | None, tag: str = "") -> dict:
    """The three phases against a fresh standalone of checkout ``repo`` (None: this one)."""
    import pulsar

    spy = args.py_spy and str(Path(args.py_spy) / tag) if tag else args.py_spy
    trace = args.strace and str(Path(args.strace) / tag) if tag else args.strace
    root = Path(tempfile.mkdtemp(prefix="bench-catchup-"))
    proc = None
    try:
        proc, port = _standalone_at(root, repo)
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", io_threads=1, message_listener_threads=1)
        # caught up: a fresh subscription, the backlog published just now (in the entry cache)
        hot = f"persistent://public/default/catchup-hot-{time.time_ns()}"
        client.subscribe(hot, "catchup", initial_position=pulsar.InitialPosition.Earliest).close()
        publish(client, hot, args.cached, args.size, args.batched)
        with profiled(spy, proc.pid, "caught_up"), straced(trace, proc.pid, "caught_up"):
            caught_up = consume(client, hot, args.cached, proc.pid)
        # far behind: the subscription exists, the backlog is large, then the broker restarts
        cold = f"persistent://public/default/catchup-cold-{time.time_ns()}"
        client.subscribe(cold, "catchup", initial_position=pulsar.InitialPosition.Earliest).close()
        publish_rate = publish(client, cold, args.messages, args.size, args.batched)
        client.close()
        proc.terminate()
        proc.wait(60)
        proc, port = _standalone_at(root, repo)
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", io_threads=1, message_listener_threads=1)
        with profiled(spy, proc.pid, "catch_up"), straced(trace, proc.pid, "catch_up"):
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
    print(f"{tag + ': ' if tag else ''}caught up: {caught_up['msgs_per_s']:,.0f} then {caught_up_after['msgs_per_s']:,.0f} msg/s "
          f"({hot_cpu:.1f} us/msg server) | catch-up of {catch_up['messages']:,}: {catch_up['msgs_per_s']:,.0f} msg/s "
          f"({catch_up['server_cpu_us_per_msg']:.1f} us/msg server) | ratio {ratio:.2f} (goal >= 0.80), "
          f"server CPU ratio {cpu_ratio:.2f} | load {result['load_avg'][0]:.1f}", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--cached", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batched", action="store_true", help="publish in batches of 1000 (default: one entry per message)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_catchup.json"))
    ap.add_argument("--py-spy", metavar="DIR", help="sample the standalone with py-spy in each consume phase (raw stacks in DIR)")
    ap.add_argument("--strace", metavar="DIR", help="count the standalone's system calls in each consume phase (strace -c, in DIR)")
    ap.add_argument("--repo", action="append", metavar="DIR",
                    help="run the standalone of this checkout (repeat for a paired A/B in interleaved rounds)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds over the checkouts (A B A B ...)")
    args = ap.parse_args()
    if not args.repo:
        result = run_once(args, None)
    else:
        repos = [Path(r).absolute() for r in args.repo]
        tags = [f"{i}-{r.name}" for i, r in enumerate(repos)]  # (two checkouts may share a name)
        rounds: dict[str, list[dict]] = {t: [] for t in tags}
        for rnd in range(args.rounds):
            for repo, tag in zip(repos, tags):
                rounds[tag].append(run_once(args, repo, tag))
        keys = ("ratio", "cpu_ratio")
        median = {t: {"ratio": statistics.median(r["ratio"] for r in rs),
                      "cpu_ratio": statistics.median(r["cpu_ratio"] for r in rs),
                      **{f"{ph}_{f}": statistics.median(r[ph][f] for r in rs)
                         for ph in ("caught_up", "catch_up", "caught_up_after") for f in ("msgs_per_s", "server_cpu_us_per_msg")}}
                  for t, rs in rounds.items()}
        for t, m in median.items():
            print(f"median {t}: " + " ".join(f"{k} {m[k]:.2f}" for k in keys) +
                  f" | catch-up {m['catch_up_msgs_per_s']:,.0f} msg/s {m['catch_up_server_cpu_us_per_msg']:.2f} us/msg"
                  f" | caught up {m['caught_up_msgs_per_s']:,.0f} / {m['caught_up_after_msgs_per_s']:,.0f} msg/s"
                  f" {m['caught_up_server_cpu_us_per_msg']:.2f} / {m['caught_up_after_server_cpu_us_per_msg']:.2f} us/msg")
        result = {"repos": [str(r) for r in repos], "rounds": rounds, "median": median}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
