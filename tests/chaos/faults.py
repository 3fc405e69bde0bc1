"""Fault schedules drawn from a seed (pure) and their application to a `Topology`.

`plan(seed, topology_kind, topics, namespaces)` is an endless, deterministic stream of
`Fault`s (kind, target, duration, the pause before it); `FaultRunner` applies them one at a
time until its deadline, healing each fault before the next one starts, so at most one
process is down or frozen at any moment (2 of 3 bookies and 1 of 2 brokers stay up).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bookie import entry_log_format, journal_format
from tests.chaos.history import History
from tests.chaos.topology import BROKER_SESSION_MS, Topology, TopologyError

# kind: (weight, role the target is drawn from or None, (min, max) duration in seconds)
CLUSTER_FAULTS: dict[str, tuple[int, str | None, tuple[float, float]]] = {
    "kill_bookie": (4, "bookie", (0.5, 5.0)),
    "pause_bookie": (3, "bookie", (1.0, 4.0)),
    "kill_broker": (4, "broker", (0.0, 3.0)),
    "pause_broker": (3, "broker", (1.0, 3.0)),
    "expire_broker_session": (1, "broker", (BROKER_SESSION_MS / 1000 + 2, BROKER_SESSION_MS / 1000 + 4)),
    "restart_zookeeper": (1, "zookeeper", (0.5, 3.0)),
    "pause_zookeeper": (1, "zookeeper", (1.0, 3.0)),
    "unload_topic": (3, None, (0.0, 0.0)),
    "unload_namespace": (1, None, (0.0, 0.0)),
    # a full disk: the bookie turns read-only (the state its disk checker sets) and back
    "readonly_bookie": (2, "bookie", (2.0, 6.0)),
    "slow_bookie_disk": (2, "bookie", (2.0, 6.0)),  # every journal fsync delayed SLOW_DISK_MS
    "torn_tail_bookie": (2, "bookie", (0.5, 2.0)),  # SIGKILL, garbage after the tails, restart
    "gc_bookie": (2, "bookie", (0.0, 0.0)),  # forced major+minor GC and compaction
}
SLOW_DISK_MS = 40
TORN_BYTES = 4096
STANDALONE_FAULTS: dict[str, tuple[int, str | None, tuple[float, float]]] = {
    "kill_standalone": (3, "standalone", (0.0, 2.0)),
    "torn_tail_standalone": (1, "standalone", (0.0, 1.0)),
    "pause_standalone": (3, "standalone", (1.0, 4.0)),
    "unload_topic": (4, None, (0.0, 0.0)),
    "unload_namespace": (1, None, (0.0, 0.0)),
}
GAP_S = (1.0, 4.0)  # quiet time before each fault


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str
    duration: float
    gap: float

    def __str__(self) -> str:
        return f"{self.kind}({self.target}, {self.duration:.1f}s)"


def plan(seed: int, topology_kind: str, targets: dict[str, list[str]], topics: list[str],
         namespaces: list[str]) -> Iterator[Fault]:
    """The fault stream of `seed`: the same seed gives the same faults in the same order."""
    rng = random.Random(seed)
    table = CLUSTER_FAULTS if topology_kind == "cluster" else STANDALONE_FAULTS
    kinds = sorted(table)
    weights = [table[k][0] for k in kinds]
    while True:
        kind = rng.choices(kinds, weights)[0]
        _, role, (lo, hi) = table[kind]
        if role is not None:
            target = rng.choice(sorted(targets[role]))
        elif kind == "unload_topic":
            target = rng.choice(sorted(topics))
        else:
            target = rng.choice(sorted(namespaces))
        yield Fault(kind, target, round(rng.uniform(lo, hi), 2), round(rng.uniform(*GAP_S), 2))


class FaultRunner:
    """Applies a fault stream to a topology until a deadline; records each in the history."""

    def __init__(self, topo: Topology, history: History, faults: Iterator[Fault]) -> None:
        self.topo = topo
        self.history = history
        self.faults = faults
        self.applied: list[Fault] = []

    def _target(self, role: str, name: str) -> Any:
        return self.topo.targets[role][name]

    def run_until(self, deadline: float, stop: Any = None) -> None:
        """Apply faults until `deadline` (time.monotonic()); `stop` (an Event) ends it early."""
        while True:
            fault = next(self.faults)
            if time.monotonic() + fault.gap + fault.duration > deadline:
                return
            if stop is not None and stop.wait(fault.gap):
                return
            if stop is None:
                time.sleep(fault.gap)
            self.apply(fault)

    def apply(self, fault: Fault) -> None:
        rec = self.history.fault(fault.kind, fault.target)
        self.applied.append(fault)
        try:
            table = CLUSTER_FAULTS if fault.kind in CLUSTER_FAULTS else STANDALONE_FAULTS
            role = table[fault.kind][1]
            if role is None or hasattr(self, fault.kind):
                getattr(self, fault.kind)(fault)
            elif fault.kind.startswith(("kill_", "restart_")):
                self._kill(role, fault)
            else:  # pause_*, and expire_broker_session: frozen past its ZooKeeper session
                # timeout, so ZooKeeper drops its ownership nodes while it still believes it
                # owns its bundles
                self._pause(role, fault)
        except (TopologyError, OSError, RuntimeError, TimeoutError) as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:500]
        finally:
            rec.t_end = self.history.now()
        self.revive_crashed(after=str(fault))

    def revive_crashed(self, after: str, grace_s: float = 1.0) -> None:
        """A process that exited by itself (not one this runner killed) is a finding: record it
        as a `crash` with its exit status and last log line, then restart it so the run goes on."""
        time.sleep(grace_s)
        for role in ("zookeeper", "bookie", "broker", "standalone"):
            for name, target in self.topo.targets.get(role, {}).items():
                if target.is_running:
                    continue
                rc = getattr(target, "returncode", None)
                tail = target.log_tail(3) if hasattr(target, "log_tail") else ""
                rec = self.history.fault("crash", name)
                rec.error = f"exited with {rc} after {after}: {tail.splitlines()[-1] if tail else ''}"[:500]
                try:
                    self.topo.restart(target)
                except (TopologyError, OSError, RuntimeError, TimeoutError) as exc:
                    rec.error += f"; restart failed: {exc}"[:300]
                rec.t_end = self.history.now()

    # -- process faults ------------------------------------------------------------------------

    def _kill(self, role: str, fault: Fault) -> None:
        target = self._target(role, fault.target)
        target.resume()
        target.kill()
        time.sleep(fault.duration)
        self.topo.restart(target)

    def _pause(self, role: str, fault: Fault) -> None:
        target = self._target(role, fault.target)
        target.pause()
        try:
            time.sleep(fault.duration)
        finally:
            target.resume()

    # -- admin faults ----------------------------------------------------------------------------

    def unload_topic(self, fault: Fault) -> None:
        path = "/admin/v2/" + fault.target.replace("://", "/", 1) + "/unload"
        r = self.topo.admin("PUT", path, timeout=30)
        if r.status_code >= 400:
            raise TopologyError(f"unload {fault.target}: {r.status_code} {r.text[:200]}")

    def unload_namespace(self, fault: Fault) -> None:
        r = self.topo.admin("PUT", f"/admin/v2/namespaces/{fault.target}/unload", timeout=30)
        if r.status_code >= 400:
            raise TopologyError(f"unload {fault.target}: {r.status_code} {r.text[:200]}")

    # -- disk faults ---------------------------------------------------------------------------

    def _bookie_http(self, fault: Fault, method: str, path: str, body: dict[str, Any]) -> None:
        url = self.topo.bookie_http[fault.target] + path
        r = httpx.request(method, url, json=body, timeout=10)
        if r.status_code >= 400:
            raise TopologyError(f"{method} {path} on {fault.target}: {r.status_code} {r.text[:200]}")

    def readonly_bookie(self, fault: Fault) -> None:
        self._bookie_http(fault, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True})
        try:
            time.sleep(fault.duration)
        finally:
            self._bookie_http(fault, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": False})

    def slow_bookie_disk(self, fault: Fault) -> None:
        self._bookie_http(fault, "PUT", "/api/v1/bookie/fault/journal_sync_delay", {"delayMs": SLOW_DISK_MS})
        try:
            time.sleep(fault.duration)
        finally:
            self._bookie_http(fault, "PUT", "/api/v1/bookie/fault/journal_sync_delay", {"delayMs": 0})

    def gc_bookie(self, fault: Fault) -> None:
        self._bookie_http(fault, "PUT", "/api/v1/bookie/gc", {"forceMajor": True, "forceMinor": True})

    def torn_tail_bookie(self, fault: Fault) -> None:
        target = self._target("bookie", fault.target)
        self._kill_and_tear(target, self.topo.bookie_dirs[fault.target], fault)

    def torn_tail_standalone(self, fault: Fault) -> None:
        target = self._target("standalone", fault.target)
        self._kill_and_tear(target, self.topo.base / "data", fault)

    def _kill_and_tear(self, target: Any, data_dir: Path, fault: Fault) -> None:
        """SIGKILL, then write garbage right after the last written byte of the newest journal
        file and entry log (what a torn write leaves), then restart: replay must stop at it."""
        target.resume()
        target.kill()
        rng = random.Random(f"{fault.target}/{fault.duration}/{fault.gap}")
        # The journal gets random garbage (a torn or corrupt tail: replay must stop at it).
        # The entry log gets what a write cut short leaves: the first part of a record. Random
        # garbage there whose first word reads as a record size is indistinguishable from
        # corruption before live data, so GC keeps such a log (conservative, never deletes).
        record = entry_log_format.encode_record(rng.getrandbits(40), rng.getrandbits(20),
                                                rng.randbytes(rng.randint(1, TORN_BYTES)))
        for pattern, magic, garbage in (
                ("*.txn", journal_format.MAGIC, rng.randbytes(rng.randint(1, TORN_BYTES))),
                ("*.log", entry_log_format.MAGIC, record[: rng.randint(1, len(record) - 1)])):
            # by magic: RocksDB's write-ahead logs are *.log files too
            files = sorted((p for p in data_dir.rglob(pattern) if _starts_with(p, magic)),
                           key=lambda p: p.stat().st_mtime)
            if files:
                tear_tail(files[-1], garbage)
        time.sleep(fault.duration)
        self.topo.restart(target)


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def tear_tail(path: Path, garbage: bytes) -> int:
    """Write `garbage` just past the last non-zero byte of `path` (inside its preallocated
    zeros, or at its end); returns the offset written at."""
    data = path.read_bytes()
    end = len(data.rstrip(b"\0"))
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(garbage)
    return end
