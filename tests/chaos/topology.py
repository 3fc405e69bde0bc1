"""The system under test as real processes: a cluster (ZooKeeper, 3 bookies, 2 brokers) or
one standalone, with named fault targets and the admin REST calls the harness needs.

Every process gets fixed free loopback ports, so a killed one restarts under the same
identity. `close()` kills everything (SIGCONT first: a paused process must not survive).
"""

from __future__ import annotations

import abc
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from tests.e2e.conftest import start_standalone
from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import QuireProcess, QuireProcesses, free_port
from tests.fixtures.zookeeper import ZooKeeperServer

BROKER_SESSION_MS = 5000  # a broker paused longer than this loses its ZooKeeper session
ENTRY_LOG_BYTES = 256 * 1024  # bookie log_size_limit in chaos runs
ENTRIES_PER_LEDGER = 100  # broker managed_ledger_max_entries_per_ledger in chaos runs
READY_TIMEOUT_S = 60.0


class Target(Protocol):
    """A process faults are applied to (QuireProcess and ZooKeeperServer both fit)."""

    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...


class TopologyError(RuntimeError):
    """The system under test could not be started, restarted or configured."""


@dataclass
class Topology(abc.ABC):
    """Common part: fault targets by kind, admin URLs, process restart."""

    kind: str
    base: Path
    service_url: str = ""
    admin_urls: list[str] = field(default_factory=list)
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> name -> target
    bookie_http: dict[str, str] = field(default_factory=dict)  # bookie name -> its HTTP admin URL
    bookie_dirs: dict[str, Path] = field(default_factory=dict)  # bookie name -> its data dir

    def restart(self, target: Any) -> None:
        if isinstance(target, ZooKeeperServer):
            target.start(timeout=READY_TIMEOUT_S)
            return
        target.resume()
        target.kill()
        target.start()
        target.wait_ready(READY_TIMEOUT_S)

    def resume_all(self) -> None:
        for group in self.targets.values():
            for t in group.values():
                try:
                    t.resume()
                except (AssertionError, OSError):
                    pass

    def ensure_running(self) -> list[str]:
        """Bring back anything dead (the end of a run heals before draining); names restarted."""
        self.resume_all()
        restarted = []
        for role in ("zookeeper", "bookie", "broker", "standalone"):
            for name, t in self.targets.get(role, {}).items():
                if not t.is_running:
                    self.restart(t)
                    restarted.append(name)
        return restarted

    def admin(self, method: str, path: str, *, timeout: float = 10.0, **kwargs: Any) -> httpx.Response:
        """One admin call, tried on each broker in turn (a killed one is skipped), redirects followed."""
        last: Exception | None = None
        for url in self.admin_urls:
            try:
                r = httpx.request(method, url + path, timeout=timeout, follow_redirects=True, **kwargs)
                if r.status_code < 500:
                    return r
                last = TopologyError(f"{method} {path}: {r.status_code} {r.text[:200]}")
            except httpx.HTTPError as exc:
                last = exc
        raise TopologyError(f"{method} {path} failed on every broker: {last}")

    def setup_namespace(self, ns: str, dedup: bool, deadline_s: float = 60.0) -> None:
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                r = self.admin("PUT", f"/admin/v2/namespaces/{ns}", json={})
                if r.status_code not in (204, 200, 409):
                    raise TopologyError(f"creating {ns}: {r.status_code} {r.text}")
                r = self.admin("POST", f"/admin/v2/namespaces/{ns}/deduplication", json=dedup)
                if r.status_code not in (204, 200):
                    raise TopologyError(f"deduplication of {ns}: {r.status_code} {r.text}")
                return
            except TopologyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def create_partitioned(self, topic: str, partitions: int) -> None:
        path = "/admin/v2/" + topic.replace("://", "/", 1)
        r = self.admin("PUT", path + "/partitions", json=partitions)
        if r.status_code not in (204, 200, 409):
            raise TopologyError(f"creating {topic}: {r.status_code} {r.text}")

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every process this topology started (cluster or standalone)."""

    def process_ids(self) -> list[int]:
        return [t.pid for g in self.targets.values() for t in g.values() if t.pid]


@dataclass
class ClusterTopology(Topology):
    zk: ZooKeeperServer | None = None
    procs: QuireProcesses | None = None

    @classmethod
    def start(cls, base: Path, bookies: int = 3, brokers: int = 2, chaos_settings: bool = True,
              journal_root: Path | None = None) -> ClusterTopology:
        """``chaos_settings=False``: the product defaults for ledger rollover, retention checks and
        entry log size, no fault injection (benchmarks measure the path users get).
        ``journal_root``: the bookies' journals go there (``bookieN`` each), e.g. on a tmpfs to
        take the disk out of a latency measurement."""
        topo = cls("cluster", base)
        try:
            topo.zk = ZooKeeperServer(base / "zk")
            topo.zk.start()
            chroot = f"/chaos-{uuid.uuid4().hex[:8]}"
            topo.zk.ensure_path(chroot)
            url = topo.zk.url(chroot)
            topo.procs = QuireProcesses(base / "logs")
            topo.targets = {"zookeeper": {"zk": topo.zk}, "bookie": {}, "broker": {}}
            for i in range(bookies):
                http = free_port()
                # small entry logs so GC and compaction have rotated logs to work on; the
                # journal delay route lets a fault make the disk slow
                chaos_bookie = ("--set", "allow_fault_injection=true", "--set", f"log_size_limit={ENTRY_LOG_BYTES}")
                journal = ("--set", f"journal_directory={journal_root / f'bookie{i}'}") if journal_root else ()
                topo.targets["bookie"][f"bookie{i}"] = start_bookie(
                    topo.procs, url, base, i, *(chaos_bookie if chaos_settings else ()), *journal, http_port=http)
                topo.bookie_http[f"bookie{i}"] = f"http://127.0.0.1:{http}"
                topo.bookie_dirs[f"bookie{i}"] = base / f"bookie{i}"
            ports = []
            # ledgers roll often and retention checks often, so trimming (and then
            # bookie GC of the deleted ledgers) happens during the run
            chaos_broker = ("--set", f"managed_ledger_max_entries_per_ledger={ENTRIES_PER_LEDGER}",
                            "--set", "retention_check_interval_in_seconds=5")
            for i in range(brokers):
                port, web = free_port(), free_port()
                proc = topo.procs(
                    "broker", "--metadata-url", url, "--port", str(port), "--web-port", str(web),
                    "--set", f"metadata_store_session_timeout_millis={BROKER_SESSION_MS}",
                    "--set", "managed_ledger_default_ensemble_size=2",
                    "--set", "managed_ledger_default_write_quorum=2",
                    "--set", "managed_ledger_default_ack_quorum=2",
                    *(chaos_broker if chaos_settings else ()),
                    "--log-level", "WARNING",
                    ready_url=f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=READY_TIMEOUT_S)
                topo.targets["broker"][f"broker{i}"] = proc
                ports.append(port)
                topo.admin_urls.append(f"http://127.0.0.1:{web}")
            topo.service_url = "pulsar://" + ",".join(f"127.0.0.1:{p}" for p in ports)
        except BaseException:
            topo.close()
            raise
        return topo

    def close(self) -> None:
        if self.procs is not None:
            for p in self.procs.procs:
                p.resume()
            for p in reversed(self.procs.procs):
                p.kill()
        if self.zk is not None:
            if self.zk.is_running:
                self.zk.resume()
            self.zk.kill()


@dataclass
class StandaloneTopology(Topology):
    proc: QuireProcess | None = None

    @classmethod
    def start(cls, base: Path) -> StandaloneTopology:
        node = start_standalone(base)
        topo = cls("standalone", base, service_url=node.url, admin_urls=[node.admin], proc=node.proc)
        topo.targets = {"standalone": {"standalone": node.proc}}
        return topo

    def close(self) -> None:
        if self.proc is not None:
            self.proc.resume()
            self.proc.kill()
