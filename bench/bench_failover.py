"""Failover benchmark: how long publishing stalls when a topic's owner dies or unloads.

A real cluster (ZooKeeper, 3 bookie processes, 2 broker processes, E=WQ=AQ=2); one official
client whose service URL lists both brokers publishes one message at a time (batching off)
and records each acknowledgement's time. Per trial:
  * kill: SIGKILL of the broker owning the topic; result = time from the kill to the first
    acknowledged publish (necessarily by the new owner), with the brokers' metadata session
    timeout at 4 s and at the default (30 s);
  * unload: ``PUT .../namespaces/{t}/{ns}/{bundle}/unload`` of the topic's bundle; result =
    the longest gap between two acknowledgements around it (the publish stall).
The killed broker is started again between trials. For kills the time from the owner's bundle
node vanishing (its session expired) to the first ack is recorded too: that part is the
handoff itself (lookup answered, ledger recovery, producer re-created). Goals (issue 14): kill < 5 s with a 4 s
session timeout, unload < 1 s. Writes bench/results/bench_failover.json.

    .venv/bin/python bench/bench_failover.py [--trials 3] [--skip-default]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pulsar  # noqa: E402

from tests.fixtures.bookies import start_bookie  # noqa: E402
from tests.fixtures.processes import QuireProcess, QuireProcesses, free_port  # noqa: E402
from tests.fixtures.zookeeper import ZooKeeperServer  # noqa: E402


class Publisher:
    """Publishes one message at a time on a thread; ``acks`` = completion times."""

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=120000)
        self.acks: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.send(f"m{i}".encode())
                self.acks.append(time.monotonic())
                i += 1
            except pulsar.PulsarException:
                self.errors += 1
            time.sleep(0.005)

    def first_ack_after(self, t0: float, timeout: float = 90.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            later = [a for a in self.acks if a > t0]
            if later:
                return later[0] - t0
            time.sleep(0.01)
        raise TimeoutError("no publish acknowledged after the event")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        try:
            self.producer.close()
        except pulsar.PulsarException:
            pass


class Cluster:
    def __init__(self, root: Path, session_ms: int) -> None:
        self.root = root
        self.zk = ZooKeeperServer(root / "zk")
        self.zk.start()
        self.zk.ensure_path("/bench")
        self.url = self.zk.url("/bench")
        self.procs = QuireProcesses(root / "logs")
        self.session_ms = session_ms
        for i in range(3):
            start_bookie(self.procs, self.url, root, i)
        self.brokers: list[tuple[QuireProcess, int, int]] = [self.start_broker(), self.start_broker()]

    def start_broker(self, port: int | None = None, web: int | None = None) -> tuple[QuireProcess, int, int]:
        port, web = port or free_port(), web or free_port()
        proc = self.procs("broker", "--metadata-url", self.url, "--port", str(port), "--web-port", str(web),
                          "--set", f"metadata_store_session_timeout_millis={self.session_ms}",
                          "--set", "managed_ledger_default_ensemble_size=2", "--set", "managed_ledger_default_write_quorum=2",
                          "--set", "managed_ledger_default_ack_quorum=2", "--log-level", "WARNING",
                          ready_url=f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=60)
        return proc, port, web

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"127.0.0.1:{p}" for _, p, _ in self.brokers)

    def owner(self, topic: str) -> int:
        """Index in ``brokers`` of the topic's owner."""
        name = topic.rsplit("/", 1)[1]
        web = self.brokers[0][2] if self.brokers[0][0].is_running else self.brokers[1][2]
        r = httpx.get(f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/default/{name}",
                      follow_redirects=True, timeout=60).json()
        return [f"pulsar://127.0.0.1:{p}" for _, p, _ in self.brokers].index(r["brokerUrl"])

    def close(self) -> None:
        self.procs.cleanup()
        self.zk.kill()


def kill_trials(root: Path, session_ms: int, trials: int) -> tuple[list[float], list[float]]:
    """(kill -> first ack, bundle node gone -> first ack) per trial."""
    cluster = Cluster(root / f"kill-{session_ms}", session_ms)
    zk = KazooClient(hosts=cluster.zk.connect_string)
    zk.start()
    out, after_gone = [], []
    try:
        for trial in range(trials):
            client = pulsar.Client(cluster.service_url, operation_timeout_seconds=120,
                                   logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, str(root / "client.log")))
            topic = f"persistent://public/default/failover-{session_ms}-{trial}"
            pub = Publisher(client, topic)
            time.sleep(1.0)
            victim = cluster.owner(topic)
            proc, port, web = cluster.brokers[victim]
            node = f"/bench/namespace/public/default/{_bundle_of(topic, _boundaries(cluster))}"
            assert zk.exists(node)
            t0 = time.monotonic()
            proc.kill()
            while True:  # until the dead owner's node is gone (or already replaced)
                try:
                    if f":{port}".encode() not in zk.get(node)[0]:
                        break
                except NoNodeError:
                    break
                time.sleep(0.01)
            gone = time.monotonic() - t0
            out.append(round(pub.first_ack_after(t0), 3))
            after_gone.append(round(out[-1] - gone, 3))
            print(f"session {session_ms} ms, trial {trial}: first ack {out[-1]} s after SIGKILL "
                  f"(owner's node gone after {gone:.3f} s)", flush=True)
            pub.stop()
            client.close()
            proc.start()
            proc.wait_ready(60)
    finally:
        zk.stop()
        cluster.close()
    return out, after_gone


def _boundaries(cluster: Cluster) -> list[str]:
    web = next(w for p, _, w in cluster.brokers if p.is_running)
    return httpx.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/default").json()["bundles"]["boundaries"]


def unload_trials(root: Path, trials: int) -> list[float]:
    cluster = Cluster(root / "unload", 4000)
    out = []
    try:
        client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60,
                               logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, str(root / "client.log")))
        for trial in range(trials):
            topic = f"persistent://public/default/unload-{trial}"
            pub = Publisher(client, topic)
            time.sleep(1.0)
            web = cluster.brokers[cluster.owner(topic)][2]
            policies = httpx.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/default").json()
            bundle_name = _bundle_of(topic, policies["bundles"]["boundaries"])
            t0 = time.monotonic()
            r = httpx.put(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/default/{bundle_name}/unload", timeout=60)
            assert r.status_code == 204, r.text
            time.sleep(3.0)
            window = [t0 - 0.5] + [a for a in pub.acks if a > t0 - 0.5]
            gaps = [b - a for a, b in zip(window, window[1:])]
            out.append(round(max(gaps), 3))
            print(f"unload trial {trial}: longest publish gap {out[-1]} s (publishes {len(pub.acks)})", flush=True)
            pub.stop()
        client.close()
    finally:
        cluster.close()
    return out


def _bundle_of(topic: str, boundaries: list[str]) -> str:
    from broker.names import TopicName
    from broker.ownership import bundle_of
    return bundle_of(TopicName.parse(topic), boundaries)


def summary(values: list[float]) -> dict[str, Any]:
    return {"trials_s": values, "median_s": round(statistics.median(values), 3), "max_s": max(values)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--skip-default", action="store_true", help="skip the 30 s default session timeout runs")
    args = ap.parse_args()
    results: dict[str, Any] = {"brokers": 2, "bookies": 3, "ensemble": "E=WQ=AQ=2"}
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        root = Path(tmp)
        results["unload"] = summary(unload_trials(root, args.trials))
        for session_ms, trials in ((4000, args.trials), (30000, 0 if args.skip_default else 1)):
            if trials:
                kill, after_gone = kill_trials(root, session_ms, trials)
                results[f"kill_session_{session_ms}ms"] = summary(kill)
                results[f"kill_session_{session_ms}ms"]["owner_node_gone_to_first_ack_s"] = after_gone
    results["goals"] = {"kill_session_4000ms_median_below_5s": results["kill_session_4000ms"]["median_s"] < 5.0,
                        "unload_median_below_1s": results["unload"]["median_s"] < 1.0}
    out = REPO / "bench" / "results" / "bench_failover.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
