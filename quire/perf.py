"""``quire perf produce|consume``: a load generator like ``pulsar-perf``.

Both directions can drive either our client (``--client quire``, the trio ``AsyncClient``) or the
official ``pulsar-client`` (``--client official``), so the two can be compared against the same
broker. Every second it reports msg/s, MB/s and latency percentiles (a live table, or plain lines
with ``--no-progress``); at the end it prints one JSON summary line (and writes it to
``--json-out``). Producer latency is send -> receipt; consumer latency is publish time -> receive.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import trio

from clients import errors
from clients.async_client import AsyncClient
from clients.options import CompressionType, ConsumerType, InitialPosition
from quire.cli_errors import cause, run_trio
from quire.cli_types import SubscriptionType

MAX_SAMPLES = 1_000_000


def percentiles(values: array, points: tuple[float, ...] = (50, 95, 99, 99.9)) -> dict[str, float]:
    """Latency percentiles in ms of samples given in seconds (nearest rank)."""
    if not values:
        return {"mean": 0.0, **{f"p{p:g}": 0.0 for p in points}, "max": 0.0}
    data = sorted(values)
    out = {"mean": round(sum(data) / len(data) * 1000, 3)}
    for p in points:
        idx = min(len(data) - 1, max(0, int(round(p / 100 * len(data))) - 1))
        out[f"p{p:g}"] = round(data[idx] * 1000, 3)
    out["max"] = round(data[-1] * 1000, 3)
    return out


@dataclass
class PerfStats:
    """Counters and latency samples (reservoir-sampled beyond MAX_SAMPLES); thread-safe enough
    for one writer (the client's I/O thread) and one reader (the reporter)."""

    started: float = field(default_factory=time.perf_counter)
    cpu_started: float = field(default_factory=time.process_time)
    count: int = 0
    bytes: int = 0
    errors: int = 0
    samples: array = field(default_factory=lambda: array("d"))
    window: array = field(default_factory=lambda: array("d"))
    _last_report: tuple[float, int, int] = (0.0, 0, 0)

    def begin(self, now: float) -> None:
        """The measured run starts now (after connecting): wall clock and process CPU time."""
        self.started = now
        self.cpu_started = time.process_time()

    def record(self, latency_s: float, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.window.append(latency_s)
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(latency_s)
        else:
            j = random.randrange(self.count)
            if j < MAX_SAMPLES:
                self.samples[j] = latency_s

    def interval(self) -> dict[str, Any]:
        """Rates since the previous call, and the window's latency percentiles."""
        now = time.perf_counter()
        t0, c0, b0 = self._last_report or (self.started, 0, 0)
        if t0 == 0.0:
            t0 = self.started
        dt = max(1e-9, now - t0)
        window, self.window = self.window, array("d")
        self._last_report = (now, self.count, self.bytes)
        return {
            "msg_per_s": (self.count - c0) / dt,
            "mb_per_s": (self.bytes - b0) / dt / 1e6,
            "latency_ms": percentiles(window),
            "total": self.count,
            "errors": self.errors,
        }

    def summary(self, **extra: Any) -> dict[str, Any]:
        elapsed = max(1e-9, time.perf_counter() - self.started)
        cpu = time.process_time() - self.cpu_started  # every thread of this process (the C++ client's too)
        return {
            **extra,
            "messages": self.count,
            "errors": self.errors,
            "duration_s": round(elapsed, 3),
            "msg_per_s": round(self.count / elapsed, 1),
            "mb_per_s": round(self.bytes / elapsed / 1e6, 3),
            "cpu_s": round(cpu, 3),
            "cpu_us_per_msg": round(cpu / self.count * 1e6, 2) if self.count else 0.0,
            "latency_ms": percentiles(self.samples),
        }


class Reporter:
    """Prints one line (or refreshes a rich table) per interval from a daemon thread.

    The live table needs a terminal on stderr; redirected to a file or pipe it would only be
    drawn once at the end, so there the reporter prints plain lines instead."""

    def __init__(self, stats: PerfStats, label: str, progress: bool, interval_s: float = 1.0) -> None:
        self._stats, self._label, self._interval = stats, label, interval_s
        self._progress = progress and sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> "Reporter":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _line(self, r: dict[str, Any]) -> str:
        lat = r["latency_ms"]
        return (f"{self._label}: {r['msg_per_s']:10.1f} msg/s  {r['mb_per_s']:8.3f} MB/s  total {r['total']}"
                f"  errors {r['errors']}  latency ms mean {lat['mean']:.2f} p50 {lat['p50']:.2f}"
                f" p95 {lat['p95']:.2f} p99 {lat['p99']:.2f} p99.9 {lat['p99.9']:.2f} max {lat['max']:.2f}")

    def _main(self) -> None:
        if not self._progress:
            while not self._stop.wait(self._interval):
                click.echo(self._line(self._stats.interval()), err=True)
            return
        from rich.console import Console
        from rich.live import Live
        from rich.markup import escape
        from rich.table import Table

        def table(r: dict[str, Any]) -> Table:
            t = Table(title=escape(self._label))  # "produce[quire]" is not markup
            for col in ("msg/s", "MB/s", "total", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms"):
                t.add_column(col, justify="right")
            lat = r["latency_ms"]
            t.add_row(f"{r['msg_per_s']:.1f}", f"{r['mb_per_s']:.3f}", str(r["total"]), str(r["errors"]),
                      f"{lat['p50']:.2f}", f"{lat['p95']:.2f}", f"{lat['p99']:.2f}", f"{lat['max']:.2f}")
            return t

        with Live(table(self._stats.interval()), console=Console(stderr=True), auto_refresh=False) as live:
            while not self._stop.wait(self._interval):
                live.update(table(self._stats.interval()), refresh=True)


@dataclass
class ProduceOptions:
    topic: str
    rate: float = 0.0
    size: int = 1024
    num_messages: int = 0
    duration_s: float = 10.0
    batching: bool = True
    batch_max_messages: int = 1000
    batch_delay_ms: int = 1
    compression: str = "NONE"
    max_pending: int = 1000


def _should_stop(opts: ProduceOptions, sent: int, start: float) -> bool:
    if opts.num_messages and sent >= opts.num_messages:
        return True
    return bool(opts.duration_s) and time.perf_counter() - start >= opts.duration_s


def produce_quire(url: str, opts: ProduceOptions, stats: PerfStats) -> None:
    payload = os.urandom(opts.size)

    async def main() -> None:
        async with AsyncClient(url) as client:
            producer = await client.create_producer(
                opts.topic, batching_enabled=opts.batching, batching_max_messages=opts.batch_max_messages,
                batching_max_publish_delay_ms=opts.batch_delay_ms, block_if_queue_full=True,
                max_pending_messages=opts.max_pending,
                compression_type=CompressionType[{"ZLIB": "ZLib"}.get(opts.compression, opts.compression)],
            )
            start = time.perf_counter()
            stats.begin(start)
            sent = 0
            size = len(payload)
            clock = time.perf_counter

            def done(t0: float) -> Callable[[Any, Any], None]:
                def cb(err: Any, _mid: Any) -> None:
                    if err is None:
                        stats.record(clock() - t0, size)
                    else:
                        stats.errors += 1
                return cb

            while not _should_stop(opts, sent, start):
                if opts.rate > 0:
                    delay = start + sent / opts.rate - clock()
                    if delay > 0:
                        await trio.sleep(delay)
                await producer.send_async(payload, done(clock()))
                sent += 1
                if sent % 256 == 0:
                    await trio.sleep(0)  # let receipts in when the pending queue never fills
            await producer.flush()
            await producer.close()

    run_trio(main)


def _official_logger(pulsar: Any) -> Any:
    """A C++-side logger for the official client: a Python ``logging`` logger is called from the
    client's threads, and at interpreter exit that aborts the process ("terminate called without
    an active exception") about one run in ten."""
    return pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/stderr")


def produce_official(url: str, opts: ProduceOptions, stats: PerfStats) -> None:
    import pulsar

    client = pulsar.Client(url, logger=_official_logger(pulsar))
    try:
        producer = client.create_producer(
            opts.topic, batching_enabled=opts.batching, batching_max_messages=opts.batch_max_messages,
            batching_max_publish_delay_ms=opts.batch_delay_ms, block_if_queue_full=True,
            max_pending_messages=opts.max_pending,
            compression_type=getattr(pulsar.CompressionType, {"ZLIB": "ZLib"}.get(opts.compression, opts.compression)),
        )
        payload = os.urandom(opts.size)
        size = len(payload)
        clock = time.perf_counter
        start = clock()
        stats.begin(start)
        sent = 0

        def done(t0: float) -> Callable[[Any, Any], None]:
            def cb(res: Any, _mid: Any) -> None:
                if res == pulsar.Result.Ok:
                    stats.record(clock() - t0, size)
                else:
                    stats.errors += 1
            return cb

        while not _should_stop(opts, sent, start):
            if opts.rate > 0:
                delay = start + sent / opts.rate - clock()
                if delay > 0:
                    time.sleep(delay)
            producer.send_async(payload, done(clock()))
            sent += 1
        producer.flush()
        producer.close()
    finally:
        client.close()


@dataclass
class ConsumeOptions:
    topic: str
    subscription: str = "perf-sub"
    subscription_type: str = "Exclusive"
    num_messages: int = 0
    duration_s: float = 10.0
    receiver_queue_size: int = 1000
    earliest: bool = False


def consume_quire(url: str, opts: ConsumeOptions, stats: PerfStats) -> None:
    async def main() -> None:
        async with AsyncClient(url) as client:
            consumer = await client.subscribe(
                opts.topic, opts.subscription, consumer_type=ConsumerType[opts.subscription_type],
                receiver_queue_size=opts.receiver_queue_size,
                initial_position=InitialPosition.Earliest if opts.earliest else InitialPosition.Latest,
            )
            start = time.perf_counter()
            stats.begin(start)
            while not opts.num_messages or stats.count < opts.num_messages:
                left = opts.duration_s - (time.perf_counter() - start) if opts.duration_s else None
                if left is not None and left <= 0:
                    break
                try:
                    msg = await consumer.receive(int(left * 1000) + 1 if left is not None else None)
                except errors.Timeout:
                    break
                stats.record(max(0.0, time.time() - msg.publish_timestamp() / 1000), len(msg.data()))
                await consumer.acknowledge(msg)
            await consumer.close()

    run_trio(main)


def consume_official(url: str, opts: ConsumeOptions, stats: PerfStats) -> None:
    import pulsar

    client = pulsar.Client(url, logger=_official_logger(pulsar))
    try:
        consumer = client.subscribe(
            opts.topic, opts.subscription, consumer_type=getattr(pulsar.ConsumerType, opts.subscription_type),
            receiver_queue_size=opts.receiver_queue_size,
            initial_position=pulsar.InitialPosition.Earliest if opts.earliest else pulsar.InitialPosition.Latest,
        )
        start = time.perf_counter()
        stats.begin(start)
        while not opts.num_messages or stats.count < opts.num_messages:
            left = opts.duration_s - (time.perf_counter() - start) if opts.duration_s else None
            if left is not None and left <= 0:
                break
            try:
                msg = consumer.receive(int(left * 1000) + 1 if left is not None else None)
            except pulsar.Timeout:
                break
            stats.record(max(0.0, time.time() - msg.publish_timestamp() / 1000), len(msg.data()))
            consumer.acknowledge(msg)
        consumer.close()
    finally:
        client.close()


def _drive(run: Callable[[str, Any, PerfStats], None], service_url: str, opts: Any, stats: PerfStats) -> bool:
    """Run the load; True if Ctrl-C stopped it (the normal way to end an open-ended run)."""
    try:
        run(service_url, opts, stats)
    except BaseException as e:  # noqa: BLE001 - only an interrupt is swallowed, see below
        if not isinstance(cause(e), KeyboardInterrupt):
            raise
        return True
    return False


def _finish(summary: dict[str, Any], json_out: Path | None) -> None:
    line = json.dumps(summary, sort_keys=True)
    lat = summary.get("latency_ms", {})
    verb = "sent" if summary.get("mode") == "produce" else "received"
    # Human-readable first (stderr, like pulsar-perf's closing lines), then the JSON line (stdout).
    click.echo(f"Aggregated throughput stats --- {summary.get('messages', 0)} records {verb} --- "
               f"{summary.get('msg_per_s', 0):.1f} msg/s --- {summary.get('mb_per_s', 0):.3f} MB/s"
               f" --- {summary.get('errors', 0)} errors", err=True)
    if lat:
        click.echo("Aggregated latency stats --- " + " - ".join(f"{k}: {v:.3f}" for k, v in lat.items()) + " ms",
                   err=True)
    click.echo(line)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(line + "\n")


_COMMON = [
    click.option("--url", "service_url", default="pulsar://localhost:6650", envvar="QUIRE_SERVICE_URL",
                 show_default=True),
    click.option("--client", "client_kind", type=click.Choice(["quire", "official"]), default="quire",
                 show_default=True, help="drive our client or the official pulsar-client"),
    click.option("--progress/--no-progress", default=True, help="live table (else one line per second)"),
    click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="also write the JSON summary here"),
]


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_COMMON):
        fn = opt(fn)
    return fn


@click.group()
def perf() -> None:
    """Throughput and latency load generator (like pulsar-perf)."""


@perf.command("produce")
@click.argument("topic")
@click.option("-r", "--rate", default=0.0, help="messages/s (0: as fast as possible)")
@click.option("-s", "--size", default=1024, show_default=True, help="message size in bytes")
@click.option("-m", "--num-messages", default=0, help="stop after this many (0: use --test-duration)")
@click.option("-t", "--test-duration", default=10.0, show_default=True, help="seconds (0: use --num-messages)")
@click.option("--batch-max-messages", default=1000, show_default=True)
@click.option("--batch-max-publish-delay-ms", default=1, show_default=True)
@click.option("--disable-batching", is_flag=True)
@click.option("-z", "--compression", type=click.Choice(["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]), default="NONE")
@click.option("--max-pending", default=1000, show_default=True)
@_common
def perf_produce(topic: str, rate: float, size: int, num_messages: int, test_duration: float,
                 batch_max_messages: int, batch_max_publish_delay_ms: int, disable_batching: bool,
                 compression: str, max_pending: int, service_url: str, client_kind: str, progress: bool,
                 json_out: Path | None) -> None:
    """Produce to TOPIC at a rate and report throughput and send latency."""
    if not num_messages and not test_duration:
        raise click.UsageError("give --num-messages or --test-duration")
    opts = ProduceOptions(topic, rate, size, num_messages, test_duration, not disable_batching,
                          batch_max_messages, batch_max_publish_delay_ms, compression, max_pending)
    stats = PerfStats()
    run = produce_quire if client_kind == "quire" else produce_official
    with Reporter(stats, f"produce[{client_kind}]", progress):
        _drive(run, service_url, opts, stats)
    _finish(stats.summary(mode="produce", client=client_kind, topic=topic, size=size, rate=rate,
                          batching=not disable_batching), json_out)


@perf.command("consume")
@click.argument("topic")
@click.option("-s", "--subscription", default="perf-sub", show_default=True)
@click.option("-st", "--subscription-type", type=SubscriptionType(), default="Exclusive", show_default=True)
@click.option("-m", "--num-messages", default=0, help="stop after this many (0: use --test-duration)")
@click.option("-t", "--test-duration", default=10.0, show_default=True, help="seconds (0: use --num-messages)")
@click.option("-q", "--receiver-queue-size", default=1000, show_default=True)
@click.option("--earliest", is_flag=True, help="a new subscription starts at the earliest message")
@_common
def perf_consume(topic: str, subscription: str, subscription_type: str, num_messages: int, test_duration: float,
                 receiver_queue_size: int, earliest: bool, service_url: str, client_kind: str, progress: bool,
                 json_out: Path | None) -> None:
    """Consume from TOPIC and report throughput and end-to-end latency."""
    opts = ConsumeOptions(topic, subscription, subscription_type, num_messages, test_duration,
                          receiver_queue_size, earliest)
    stats = PerfStats()
    run = consume_quire if client_kind == "quire" else consume_official
    with Reporter(stats, f"consume[{client_kind}]", progress):
        _drive(run, service_url, opts, stats)
    _finish(stats.summary(mode="consume", client=client_kind, topic=topic), json_out)
