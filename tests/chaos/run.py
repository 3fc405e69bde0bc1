"""One chaos run: start the system, run the workload under a seeded fault schedule, heal,
drain every subscription, check the history, and tear everything down.

Phases (each bounded): start -> workload + faults for `seconds` -> heal (restart anything
down) -> producers settle (30 s at most) -> consumers catch up (30 s) -> drains, in parallel
(`DRAIN_MAX_S`) -> check -> close. Everything started is killed in a `finally`.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.checker import Report, check
from tests.chaos.faults import FaultRunner, plan
from tests.chaos.history import History, SubscriptionSpec
from tests.chaos.topology import ClusterTopology, StandaloneTopology, Topology
from tests.chaos.workload import ConsumerWorker, CursorWatcher, Lib, ProducerWorker, drain, settle_pending

log = logging.getLogger(__name__)

DEDUP_NS, PLAIN_NS = "public/chaos-dedup", "public/default"
SETTLE_S, CATCH_UP_S, DRAIN_QUIET_S, DRAIN_MAX_S = 30.0, 30.0, 3.0, 90.0
KEYS = [f"k{i}" for i in range(8)]


@dataclass(frozen=True)
class TopicPlan:
    """A topic, its subscription under test and who produces/consumes it with which library."""

    name: str
    dedup: bool
    partitions: int
    sub_type: str
    producers: tuple[tuple[str, bool], ...]  # (library, batching) per producer
    consumers: tuple[str, ...]  # library per consumer
    keyed: bool = False
    audit: bool = True  # an unread durable subscription that pins every ledger until the drain

    @property
    def topic(self) -> str:
        return f"persistent://{DEDUP_NS if self.dedup else PLAIN_NS}/chaos-{self.name}"


# Every subscription type, dedup on and off, batching on and off, partitioned and not, both
# libraries on each side (and mixed on one subscription).
TOPICS = [
    TopicPlan("excl", True, 0, "Exclusive", (("official", False),), ("quire",)),
    TopicPlan("failover", True, 3, "Failover", (("quire", True),), ("official", "official")),
    TopicPlan("keyshared", True, 2, "Key_Shared", (("quire", True), ("official", False)), ("quire", "official"), keyed=True),
    TopicPlan("shared", False, 0, "Shared", (("official", True), ("quire", False)), ("quire", "quire")),
    TopicPlan("excl-nodedup", False, 2, "Exclusive", (("quire", False),), ("official",)),
    TopicPlan("failover-nodedup", False, 0, "Failover", (("official", True),), ("quire", "quire")),
    # no audit subscription: consumed ledgers are trimmed by retention (0/0 in public/default)
    # while the run goes on, and the bookies' GC reclaims them under the other faults
    TopicPlan("retained", False, 0, "Shared", (("official", False), ("quire", False)), ("quire",), audit=False),
]


@dataclass
class ChaosRun:
    topology: str
    seconds: float
    seed: int
    base: Path
    rate: float = 15.0  # messages per second per producer
    history: History = field(default_factory=History)
    faults: FaultRunner | None = None
    notes: list[str] = field(default_factory=list)

    def execute(self) -> dict[str, Any]:
        started = time.monotonic()
        topo: Topology | None = None
        libs: dict[str, Lib] = {}
        producers: list[ProducerWorker] = []
        consumers: list[ConsumerWorker] = []
        watcher: CursorWatcher | None = None
        pids: list[int] = []
        try:
            topo = (ClusterTopology.start(self.base) if self.topology == "cluster"
                    else StandaloneTopology.start(self.base))
            pids = topo.process_ids()
            topo.setup_namespace(DEDUP_NS, True)
            topo.setup_namespace(PLAIN_NS, False)
            for tp in TOPICS:
                if tp.partitions:
                    topo.create_partitioned(tp.topic, tp.partitions)
            for name in ("official", "quire"):
                libs[name] = Lib.open(name, topo.service_url, str(self.base / f"client-{name}.log"))
            specs = self._subscriptions()
            for tp in TOPICS:
                spec = next(s for s in specs if s.topic == tp.topic and s.name == "sub")
                for i, lib in enumerate(tp.consumers):
                    w = ConsumerWorker(libs[lib], spec, f"{tp.name}-c{i}-{lib}", self.history)
                    if w.subscribe() is None:
                        raise RuntimeError(f"cannot subscribe {w.name}")
                    consumers.append(w)
                if not tp.audit:
                    continue
                audit = next(s for s in specs if s.topic == tp.topic and s.name == "audit")
                a = ConsumerWorker(libs["official"], audit, f"{tp.name}-audit", self.history)
                if a.subscribe() is None:
                    raise RuntimeError(f"cannot create {audit.name} on {tp.topic}")
                a.finish()  # a durable subscription nobody reads until the drain
            for tp in TOPICS:
                for i, (lib, batching) in enumerate(tp.producers):
                    producers.append(ProducerWorker(libs[lib], tp.topic, f"{tp.name}-p{i}-{lib}", self.history,
                                                    batching, KEYS if tp.keyed else [], self.rate, self.seed))
            watcher = CursorWatcher(topo.admin, specs, self.history)
            self.history.t0 = time.monotonic()
            for w in consumers:
                w.start()
            for p in producers:
                p.start()
            watcher.start()
            targets = {role: list(group) for role, group in topo.targets.items()}
            self.faults = FaultRunner(topo, self.history, plan(
                self.seed, topo.kind, targets, [tp.topic for tp in TOPICS], [DEDUP_NS, PLAIN_NS]))
            self.faults.run_until(time.monotonic() + self.seconds)
            restarted = topo.ensure_running()
            if restarted:
                self.notes.append(f"restarted at the end: {restarted}")
            for p in producers:
                p.stop.set()
            settle_deadline = time.monotonic() + SETTLE_S
            for p in producers:
                p.finish(max(0.0, settle_deadline - time.monotonic()))
            unsettled = settle_pending(self.history)
            if unsettled:
                self.notes.append(f"{unsettled} sends without an outcome after {SETTLE_S:.0f}s: unknown")
            self._catch_up(consumers)
            for w in consumers:
                w.finish()
            self._drain_all(libs["official"], specs)
            watcher.finish()
            self.history.t_end = self.history.now()
        finally:
            if watcher is not None:
                watcher.stop.set()
            for p in producers:
                p.stop.set()
            for w in consumers:
                w.stop.set()
            for client_lib in libs.values():
                client_lib.close()
            if topo is not None:
                pids = sorted(set(pids) | set(topo.process_ids()))
                topo.close()
        report = check(self.history)
        return self._result(report, violations=invariant_violations(self.base), leftover=[p for p in pids if alive(p)], wall_s=time.monotonic() - started,
                            producers=producers, consumers=consumers, watcher=watcher)

    def _subscriptions(self) -> list[SubscriptionSpec]:
        specs = []
        for tp in TOPICS:
            specs.append(SubscriptionSpec(tp.topic, "sub", tp.sub_type, tp.dedup, tp.partitions))
            if tp.audit:
                specs.append(SubscriptionSpec(tp.topic, "audit", "Exclusive", tp.dedup, tp.partitions))
        self.history.subscriptions = specs
        return specs

    def _catch_up(self, consumers: list[ConsumerWorker]) -> None:
        """Let the consumers read what the producers sent last (until 3 s pass quietly)."""
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            if all(time.monotonic() - w.last_receive > DRAIN_QUIET_S for w in consumers):
                return
            time.sleep(0.2)

    def _drain_all(self, lib: Lib, specs: list[SubscriptionSpec]) -> None:
        threads = [threading.Thread(target=drain, args=(lib, s, self.history, DRAIN_QUIET_S, DRAIN_MAX_S),
                                    daemon=True) for s in specs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DRAIN_MAX_S + 30)

    def _result(self, report: Report, *, violations: list[str], leftover: list[int], wall_s: float, producers: list[ProducerWorker],
                consumers: list[ConsumerWorker], watcher: CursorWatcher | None) -> dict[str, Any]:
        faults = self.history.faults
        by_kind = Counter(f.kind for f in faults if f.kind != "crash")
        errors = [f"{f.kind}({f.target}) at {f.t_start:.1f}s: {f.error}" for f in faults
                  if f.error and f.kind != "crash"]
        crashes = [f"{f.target} at {f.t_start:.1f}s {f.error}" for f in faults if f.kind == "crash"]
        return {
            "topology": self.topology, "seed": self.seed, "fault_seconds": self.seconds,
            "wall_seconds": round(wall_s, 1), "ok": report.ok and not leftover and not violations,
            "failures": report.failures + [f"process {p} left running" for p in leftover] + violations,
            "faults": sum(by_kind.values()), "crashes": crashes, "faults_by_kind": dict(sorted(by_kind.items())), "fault_errors": errors,
            "fault_log": [f"{f.t_start:.1f}-{(f.t_end or f.t_start):.1f}s {f.kind}({f.target})" for f in faults],
            "totals": report.totals(), "notes": self.notes,
            "client_errors": {"producer_create": sum(p.create_errors for p in producers),
                              "consumer": sum(w.errors for w in consumers),
                              "cursor_polls_failed": watcher.errors if watcher else 0},
            "report": report.to_json(), "leftover_processes": leftover,
        }


def invariant_violations(base: Path) -> list[str]:
    """Lines that the processes' in-code invariant checks logged (quire.invariants): a
    violation fails the run even when an error boundary kept the process alive."""
    found = []
    for path in sorted([*base.glob("*.log"), *base.glob("logs/*.log")]):  # process logs, not data
        try:
            with open(path, "rb") as f:
                for line in f:
                    if b"invariant violated" in line:
                        found.append(f"{path.name}: {line.decode(errors='replace').strip()[:300]}")
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_chaos(topology: str, seconds: float, seed: int, base: Path | None = None,
              out_json: Path | None = None, rate: float = 15.0) -> dict[str, Any]:
    base = Path(base or tempfile.mkdtemp(prefix=f"quire-chaos-{topology}-", dir="/tmp"))
    run = ChaosRun(topology, seconds, seed, base, rate)
    result = run.execute()
    result["base_dir"] = str(base)
    (base / "history.json").write_text(json.dumps(run.history.to_json()))
    (base / "result.json").write_text(json.dumps(result, indent=1))
    if out_json is not None:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(result, indent=1))
    return result


def summary(result: dict[str, Any]) -> str:
    """The human report: faults by kind, messages sent/acked/checked, longest unavailability."""
    t = result["totals"]
    lines = [
        f"chaos {result['topology']} seed={result['seed']} faults for {result['fault_seconds']}s "
        f"(wall {result['wall_seconds']}s): {'OK' if result['ok'] else 'FAILED'}",
        f"faults: {result['faults']} " + ", ".join(f"{k}={v}" for k, v in result["faults_by_kind"].items()),
        f"messages: sent={t['sent']} acked={t['acked']} failed={t['failed']} unknown={t['unknown']} "
        f"checked(distinct delivered)={t['distinct']} deliveries={t['delivered']}",
        f"lost={t['lost']} order_violations={t['order_violations']} corrupt={t['corrupt']} "
        f"duplicates(dedup on)={t['duplicates_dedup_on']} duplicates(dedup off)={t['duplicates_dedup_off']}",
        f"redeliveries={t['redeliveries']} unacked_deliveries={t['unacked_deliveries']} lost_acks={t['lost_acks']}",
        f"longest unavailability: {t['longest_unavailable_s']}s on {t['longest_unavailable_topic']}",
    ]
    for c in result["crashes"]:
        lines.append(f"CRASH (a process exited by itself, restarted): {c}")
    if result["fault_errors"]:
        lines.append(f"fault errors ({len(result['fault_errors'])}): " + "; ".join(result["fault_errors"][:5]))
    lines += [f"note: {n}" for n in result["notes"]]
    lines += [f"FAIL: {f}" for f in result["failures"][:30]]
    return "\n".join(lines)
