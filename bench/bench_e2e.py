"""End-to-end broker benchmark with the official pulsar-client against `quire standalone`.

One producer and one consumer on one topic: 100 B and 1 KiB messages with batching on
(msgs/s and MB/s produced, and consumed end to end), then one-at-a-time publish latency
(p50/p99) at a fixed moderate rate with batching off. References measured in the same run:
  * throughput: the same payload bytes pushed over a loopback TCP connection by the same
    Python process (what the machine's loopback + interpreter give a single stream);
  * latency: write + fdatasync of a small record in the data directory (every acknowledged
    non-batched publish waits for one journal fsync).
Every phase also records the CPU time the standalone process and the client process spent
per message (µs/msg): on a shared machine wall-clock rates are noisy, CPU per message is not.
The client settings are those a user chasing throughput sets (as pulsar-perf users do): a
pending window large enough that window / fsync round trip is far above the target rate, full
1000-message batches (byte cap raised so 1 KiB batches are not cut at 128 KiB), a deep
receiver queue and ``batch_receive`` on the consumer; they are recorded in the JSON. The
client's CPU is split into its Python send_async loop, its Python receive loop and the C++
client threads: with the official Python client the producer loop alone costs several µs per
message, which bounds the batched rates more than the broker does (compare the raw-protocol
phase). Prints ratios (and the issue's targets: 300k msgs/s at 100 B, 90k at 1 KiB, p99 <= 1
ms) and writes bench/results/bench_e2e.json.

    .venv/bin/python bench/bench_e2e.py [--messages 200000] [--latency-messages 2000] [--rate 500]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a user chasing throughput sets (pulsar-perf style); recorded in the JSON.
PRODUCER_SETTINGS = {
    "batching_enabled": True,
    "batching_max_messages": 1000,
    "batching_max_allowed_size_in_bytes": 4 * 1024 * 1024,
    "batching_max_publish_delay_ms": 5,
    "max_pending_messages": 100_000,
    "block_if_queue_full": True,
}
# "api": batch_receive (one Python call per batch) or receive (one per message: ~3x the
# consumer thread's CPU per message); the rest are subscribe() arguments.
CONSUMER_SETTINGS: dict = {"receiver_queue_size": 20_000, "api": "batch_receive"}
BATCH_RECEIVE_POLICY = (1000, 4 * 1024 * 1024, 10)  # max messages, max bytes, timeout ms
ACK_EVERY = 1000  # receive API: cumulative ack every N messages (batch_receive: after each batch)


def paced_send_latencies(send: Any, payload: bytes, n: int, rate: float) -> list[float]:
    """``n`` one-at-a-time sends at ``rate`` per second; the seconds each took."""
    lat = []
    interval = 1.0 / rate
    next_at = time.perf_counter()
    for _ in range(n):
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        t0 = time.perf_counter()
        send(payload)
        lat.append(time.perf_counter() - t0)
        next_at += interval
    return lat


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads) from /proc, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def start_standalone(root: Path, repo: Path = REPO, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """``quire standalone`` of checkout ``repo`` (its code on PYTHONPATH when ``env`` is given:
    an A/B run) with its data under ``root``; returns the process and its broker port."""
    port, web = free_port(), free_port()
    cmd = [sys.executable, "-m", "quire", "standalone", "--data-dir", str(root / "data"), "--port", str(port),
           "--web-port", str(web), "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING"]
    full_env = None if env is None else dict(os.environ, PYTHONPATH=str(repo), **env)
    proc = subprocess.Popen(cmd, cwd=repo, env=full_env, stdout=subprocess.DEVNULL,
                            stderr=open(root / "standalone.log", "w"))
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=1)
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("standalone did not start: " + (root / "standalone.log").read_text()[-2000:])


def throughput(client, size: int, n: int, server_pid: int) -> dict:  # type: ignore[no-untyped-def]
    import pulsar

    topic = f"persistent://public/default/bench-{size}-{time.time_ns()}"
    settings = dict(CONSUMER_SETTINGS)
    api = settings.pop("api")
    if api == "batch_receive":
        # Up to 1000 messages per call, 10 ms wait at most (the default waits for 10 MB or 100 ms).
        settings["batch_receive_policy"] = pulsar.ConsumerBatchReceivePolicy(*BATCH_RECEIVE_POLICY)
    consumer = client.subscribe(topic, "bench", **settings)
    producer = client.create_producer(topic, compression_type=pulsar.CompressionType.NONE, **PRODUCER_SETTINGS)
    payload = os.urandom(size)
    done = threading.Event()
    received = [0, 0.0]

    consumer_cpu = [0.0]

    def consume() -> None:
        t0 = time.thread_time()
        last = None
        if api == "batch_receive":
            # One call (and one GIL round trip) per batch of whatever the client has queued.
            while received[0] < n:
                msgs = consumer.batch_receive()
                if msgs:
                    received[0] += len(msgs)
                    last = msgs[-1]
                    consumer.acknowledge_cumulative(last)
        else:
            while received[0] < n:
                m = consumer.receive(timeout_millis=30000)
                received[0] += 1
                last = m
                if received[0] % ACK_EVERY == 0:
                    consumer.acknowledge_cumulative(m)
            if last is not None:
                consumer.acknowledge_cumulative(last)
        received[1] = time.perf_counter()
        consumer_cpu[0] = time.thread_time() - t0
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    server_cpu0, client_cpu0, producer_cpu0 = cpu_seconds(server_pid), own_cpu_seconds(), time.thread_time()
    start = time.perf_counter()
    for _ in range(n):
        producer.send_async(payload, None)
    producer.flush()
    produced_s = time.perf_counter() - start
    producer_cpu = time.thread_time() - producer_cpu0
    done.wait(300)
    consumed_s = received[1] - start
    server_cpu, client_cpu = cpu_seconds(server_pid) - server_cpu0, own_cpu_seconds() - client_cpu0
    producer.close()
    consumer.close()
    return {
        "size": size, "messages": n,
        "produce_msgs_per_s": n / produced_s, "produce_mb_per_s": n * size / produced_s / 1e6,
        "consume_msgs_per_s": n / consumed_s, "consume_mb_per_s": n * size / consumed_s / 1e6,
        "server_cpu_us_per_msg": server_cpu / n * 1e6, "client_cpu_us_per_msg": client_cpu / n * 1e6,
        # where the client's CPU goes: the Python send_async loop, the Python receive loop,
        # and the rest (the C++ client's I/O and listener threads)
        "client_producer_thread_us_per_msg": producer_cpu / n * 1e6,
        "client_consumer_thread_us_per_msg": consumer_cpu[0] / n * 1e6,
        "client_other_threads_us_per_msg": (client_cpu - producer_cpu - consumer_cpu[0]) / n * 1e6,
        "server_cpu_share": server_cpu / consumed_s,
    }


def latency(client, n: int, rate: float, server_pid: int) -> dict:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/bench-lat-{time.time_ns()}"
    producer = client.create_producer(topic, batching_enabled=False)
    payload = os.urandom(100)
    for _ in range(50):
        producer.send(payload)  # warm-up: topic loaded, ledger open
    server_cpu0 = cpu_seconds(server_pid)
    lat = paced_send_latencies(producer.send, payload, n, rate)
    server_cpu = cpu_seconds(server_pid) - server_cpu0
    producer.close()
    lat.sort()
    return {"messages": n, "rate": rate, "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3,
            "mean_ms": statistics.mean(lat) * 1e3, "server_cpu_us_per_msg": server_cpu / n * 1e6}


def raw_protocol_throughput(port: int, size: int, batch: int, batches: int, outstanding: int = 64) -> dict:
    """Pre-encoded batched SENDs over one connection (no client-library cost): what the
    broker + bookie path itself sustains, measured with the project's codec."""
    sys.path.insert(0, str(REPO))
    from clients.protocol import batch as B
    from clients.protocol import commands as C
    from clients.protocol import frames
    from clients.protocol import pulsar_api_pb2 as pb

    topic = f"persistent://public/default/bench-raw-{size}-{time.time_ns()}"
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    dec = frames.FrameDecoder()

    def wait_for(kind: int) -> list:
        got = []
        while not any(f.command.type == kind for f in got):
            got.extend(dec.feed(sock.recv(1 << 20)))
        return got

    sock.sendall(frames.encode_command(C.connect("bench", protocol_version=20)))
    wait_for(pb.BaseCommand.CONNECTED)
    sock.sendall(frames.encode_command(C.producer(topic, 1, 1, producer_name="raw")))
    wait_for(pb.BaseCommand.PRODUCER_SUCCESS)
    payload = B.serialize_batch([(C.single_message_metadata(payload_size=size), os.urandom(size))] * batch)
    start = time.perf_counter()
    sent = acked = 0
    while acked < batches:
        while sent < batches and sent - acked < outstanding:
            md = C.message_metadata("raw", sent * batch, int(time.time() * 1000), num_messages_in_batch=batch)
            sock.sendall(frames.encode_payload_command(C.send(1, sent * batch, batch), md, payload))
            sent += 1
        for f in dec.feed(sock.recv(1 << 20)):
            if f.command.type == pb.BaseCommand.SEND_RECEIPT:
                acked += 1
    elapsed = time.perf_counter() - start
    sock.close()
    n = batches * batch
    return {"size": size, "messages": n, "msgs_per_s": n / elapsed, "mb_per_s": n * size / elapsed / 1e6}


@contextlib.contextmanager
def attached(cmd: list[str] | None) -> Iterator[None]:
    """Run a tool that attaches to a process (py-spy, strace) around a block: started a second
    before it, stopped with SIGINT (so it writes its output) after it. ``None``: nothing."""
    if cmd is None:
        yield
        return
    tool = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the phase starts
    try:
        yield
    finally:
        tool.send_signal(signal.SIGINT)
        try:
            tool.wait(60)
        except subprocess.TimeoutExpired:
            tool.kill()


def profiled(out_dir: str | None, pid: int, phase: str) -> contextlib.AbstractContextManager[None]:
    """With ``--py-spy DIR``: sample the standalone process during one phase (for profiling
    runs only; sampling costs the machine some CPU)."""
    if not out_dir:
        return attached(None)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return attached([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-f", "raw",
                     "-r", "250", "-o", str(Path(out_dir) / f"{phase}.txt")])


def loopback_reference(total_bytes: int) -> float:
    """Bytes/s one Python sender pushes through loopback TCP to one Python receiver."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = [0]

    def recv() -> None:
        conn, _ = srv.accept()
        while got[0] < total_bytes:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            got[0] += len(chunk)
        conn.close()

    t = threading.Thread(target=recv)
    t.start()
    chunk = os.urandom(64 * 1024)
    s = socket.create_connection(("127.0.0.1", port))
    start = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        s.sendall(chunk)
        sent += len(chunk)
    t.join()
    elapsed = time.perf_counter() - start
    s.close()
    srv.close()
    return sent / elapsed


def fsync_reference(directory: Path, n: int = 500) -> dict:
    path = directory / "fsync-probe"
    lat = []
    with open(path, "wb") as f:
        for _ in range(n):
            t0 = time.perf_counter()
            f.write(b"x" * 256)
            f.flush()
            os.fdatasync(f.fileno())
            lat.append(time.perf_counter() - t0)
    path.unlink()
    lat.sort()
    return {"p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--latency-messages", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--max-pending", type=int, help="override max_pending_messages (A/B of client settings)")
    ap.add_argument("--receiver-queue", type=int, help="override receiver_queue_size")
    ap.add_argument("--batch-bytes", type=int, help="override batching_max_allowed_size_in_bytes")
    ap.add_argument("--consumer-api", choices=("batch_receive", "receive"), default="batch_receive")
    ap.add_argument("--skip-raw", action="store_true", help="skip the raw-protocol phase")
    ap.add_argument("--py-spy", metavar="DIR", help="profile the standalone process per phase (py-spy raw stacks)")
    ap.add_argument("--out", help="JSON result path (default bench/results/bench_e2e.json)")
    ap.add_argument("--only", choices=("100", "1024", "latency"), help="run one phase only (profiling)")
    args = ap.parse_args()
    if args.max_pending:
        PRODUCER_SETTINGS["max_pending_messages"] = args.max_pending
    if args.receiver_queue:
        CONSUMER_SETTINGS["receiver_queue_size"] = args.receiver_queue
    if args.batch_bytes:
        PRODUCER_SETTINGS["batching_max_allowed_size_in_bytes"] = args.batch_bytes
    CONSUMER_SETTINGS["api"] = args.consumer_api
    import pulsar

    root = Path(tempfile.mkdtemp(prefix="bench-e2e-", dir=args.dir))
    proc, port = start_standalone(root)
    results: dict = {
        "throughput": [],
        "targets": {"msgs_per_s_100b": 300_000, "msgs_per_s_1kib": 90_000, "p99_ms": 1.0},
        "client_settings": {"producer": PRODUCER_SETTINGS, "consumer": CONSUMER_SETTINGS,
                            "batch_receive_policy": BATCH_RECEIVE_POLICY, "ack_cumulative_every": ACK_EVERY, "latency_producer": {"batching_enabled": False}},
    }
    try:
        # A Python logging logger in the C++ client can abort the process at exit.
        client = pulsar.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=60,
                               logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/stderr"))
        for size in (100, 1024):
            if args.only not in (None, str(size)):
                continue
            n = args.messages if size == 100 else args.messages // 2
            with profiled(args.py_spy, proc.pid, f"{size}b"):
                r = throughput(client, size, n, proc.pid)
            ref = loopback_reference(n * size)
            r["loopback_reference_mb_per_s"] = ref / 1e6
            r["consume_vs_loopback"] = r["consume_mb_per_s"] * 1e6 / ref
            results["throughput"].append(r)
            print(f"{size:5d} B batched: produce {r['produce_msgs_per_s']:10,.0f} msg/s {r['produce_mb_per_s']:7.1f} MB/s | "
                  f"end-to-end consume {r['consume_msgs_per_s']:10,.0f} msg/s {r['consume_mb_per_s']:7.1f} MB/s | "
                  f"loopback reference {ref / 1e6:8.1f} MB/s (ratio {r['consume_vs_loopback']:.3f}) | "
                  f"CPU/msg server {r['server_cpu_us_per_msg']:.2f} us client {r['client_cpu_us_per_msg']:.2f} us "
                  f"(send_async loop {r['client_producer_thread_us_per_msg']:.2f}, receive loop "
                  f"{r['client_consumer_thread_us_per_msg']:.2f}, C++ threads {r['client_other_threads_us_per_msg']:.2f})")
        if not args.skip_raw and args.only is None:
            raw = raw_protocol_throughput(port, 100, 1000, max(50, args.messages // 1000))
            results["raw_protocol_100b"] = raw
            print(f"  100 B raw protocol (pre-encoded batches of 1000, no client library): "
                  f"{raw['msgs_per_s']:10,.0f} msg/s {raw['mb_per_s']:7.1f} MB/s "
                  f"({raw['msgs_per_s'] / results['throughput'][0]['produce_msgs_per_s']:.1f}x the official client's rate)")
        if args.only in (None, "latency"):
            with profiled(args.py_spy, proc.pid, "latency"):
                lat = latency(client, args.latency_messages, args.rate, proc.pid)
            fs = fsync_reference(root)
            lat["fsync_reference"] = fs
            lat["p99_vs_fsync_p99"] = lat["p99_ms"] / fs["p99_ms"] if fs["p99_ms"] else None
            results["latency"] = lat
            print(f"publish latency (batching off, {args.rate:.0f} msg/s): p50 {lat['p50_ms']:.2f} ms p99 {lat['p99_ms']:.2f} ms | "
                  f"fdatasync reference p50 {fs['p50_ms']:.2f} ms p99 {fs['p99_ms']:.2f} ms (p99 ratio {lat['p99_vs_fsync_p99']:.2f}) | "
                  f"server CPU {lat['server_cpu_us_per_msg']:.0f} us/msg")
        if args.only is None:
            t100 = results["throughput"][0]["produce_msgs_per_s"]
            t1k = results["throughput"][1]["consume_msgs_per_s"]
            print(f"vs targets: 100 B produce {t100 / 300_000:.2f}x of 300k msg/s; 1 KiB end to end {t1k / 90_000:.2f}x of 90k; "
                  f"p99 {results['latency']['p99_ms']:.2f} ms vs 1 ms")
        client.close()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)
    out = Path(args.out) if args.out else REPO / "bench" / "results" / "bench_e2e.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
