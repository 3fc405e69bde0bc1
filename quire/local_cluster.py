"""``quire cluster up``: a local multi-process cluster for development.

A real ZooKeeper (the system's ``zookeeper.jar`` run by Java, unless ``--metadata-url`` names
one already running), N ``quire bookie`` and M ``quire broker`` processes, each its own process
group with its log under ``DATA_DIR/logs``, data under one directory. They start in the order a
cluster needs (metadata store, bookies, brokers), each waited for before the next; Ctrl-C (or
SIGTERM) stops them in the reverse order, each with SIGTERM (its clean shutdown) and SIGKILL
only past a timeout, and exits 0. A child that dies is reported and ends the cluster (exit 1).

Ports are consecutive from each ``--*-port`` base (``0``: free ports picked at start).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import click

ZOOKEEPER_JARS = [Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/java/slf4j-nop.jar")]


class ClusterStartError(click.ClickException):
    """A process of the cluster did not come up (the message names it and its log)."""


_handed_out: set[int] = set()  # ports this process chose already (its children bind them later)


def free_port() -> int:
    """A free loopback port not handed out before: the kernel may give a port it just gave
    again once its probe socket closed, and our children bind their ports only later (two
    brokers once got the same one)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def ports(base: int, n: int) -> list[int]:
    return [free_port() for _ in range(n)] if base == 0 else [base + i for i in range(n)]


@dataclass
class Child:
    name: str
    argv: list[str]
    log: Path
    address: str = ""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            # Own process group: the terminal's Ctrl-C reaches only `cluster up`, which stops
            # the children in order.
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait(child: Child, ready: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise ClusterStartError(f"{child.name} exited during start (log {child.log}):\n{child.tail()}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise ClusterStartError(f"{child.name} not ready after {timeout:.0f} s (log {child.log}):\n{child.tail()}")


def zookeeper_child(data_dir: Path, port: int) -> Child:
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JARS[0].exists():
        raise ClusterStartError("starting ZooKeeper needs Java and the zookeeper package "
                                "(scripts/bootstrap.sh installs both); or give --metadata-url zk://host:port")
    zk_dir = data_dir / "zookeeper"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    conf = zk_dir / "zoo.cfg"
    conf.write_text("\n".join([
        "tickTime=500", f"dataDir={zk_dir / 'data'}", f"clientPort={port}", "clientPortAddress=127.0.0.1",
        "minSessionTimeout=1000", "maxSessionTimeout=60000", "maxClientCnxns=0", "4lw.commands.whitelist=*",
        "admin.enableServer=false", "",
    ]))
    cp = ":".join(str(j) for j in ZOOKEEPER_JARS if j.exists())
    argv = [java, "-Xmx256m", "-XX:+UseSerialGC", "-Djute.maxbuffer=5242880", "-Dzookeeper.admin.enableServer=false",
            "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", str(conf)]
    return Child("zookeeper", argv, data_dir / "logs" / "zookeeper.log", f"127.0.0.1:{port}")


class LocalCluster:
    """The processes of one ``cluster up``, started and stopped in order."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stopping = False

    def add(self, child: Child, ready: object, timeout: float) -> None:
        self.children.append(child)
        child.start()
        _wait(child, ready, timeout)
        pid = child.proc.pid if child.proc else "?"
        click.echo(f"{child.name:<10} {child.address} (pid {pid}, log {child.log})", err=True)

    def stop(self, timeout: float = 20.0) -> None:
        for child in reversed(self.children):  # brokers, then bookies, then ZooKeeper
            if child.proc is not None:
                code = child.stop(timeout)
                how = ", its normal end on SIGTERM" if code in (143, -signal.SIGTERM) else ""  # Java: 128 + 15
                click.echo(f"stopped {child.name} (exit {code}{how})", err=True)

    def dead(self) -> Child | None:
        return next((c for c in self.children if not c.alive()), None)


def _quire(*args: str) -> list[str]:
    return [sys.executable, "-m", "quire", *args]


@click.group("cluster")
def cluster() -> None:
    """A local multi-process cluster for development (`quire cluster up`)."""


@cluster.command("up")
@click.option("--bookies", default=3, show_default=True, help="bookie processes")
@click.option("--brokers", default=2, show_default=True, help="broker processes")
@click.option("--zookeeper/--no-zookeeper", default=True, show_default=True,
              help="start a ZooKeeper (needs Java); --no-zookeeper needs --metadata-url")
@click.option("--metadata-url", default=None, help="an existing store (zk://host:port/chroot) instead of a new ZooKeeper")
@click.option("--data-dir", default="./cluster-data", show_default=True, type=click.Path(file_okay=False),
              help="everything lives under it: zookeeper/, bookie-N/, logs/")
@click.option("--zookeeper-port", default=2181, show_default=True, help="ZooKeeper client port (0: any free port)")
@click.option("--bookie-port", default=3181, show_default=True, help="first bookie's port, then +1 each (0: free ports)")
@click.option("--bookie-http-port", default=8000, show_default=True, help="first bookie's HTTP port (0: free ports)")
@click.option("--broker-port", default=6650, show_default=True, help="first broker's Pulsar port (0: free ports)")
@click.option("--web-port", default=8080, show_default=True, help="first broker's admin HTTP port (0: free ports)")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def up(bookies: int, brokers: int, zookeeper: bool, metadata_url: str | None, data_dir: str, zookeeper_port: int,
       bookie_port: int, bookie_http_port: int, broker_port: int, web_port: int, log_level: str) -> None:
    """Start ZooKeeper, BOOKIES bookies and BROKERS brokers as separate processes; Ctrl-C stops them."""
    if bookies < 1 or brokers < 1:
        raise click.BadParameter("a cluster needs at least one bookie and one broker")
    if metadata_url is None and not zookeeper:
        raise click.UsageError("--no-zookeeper needs --metadata-url zk://host:port/chroot")
    base = Path(data_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    logs = base / "logs"
    quorum = min(2, bookies)
    local = LocalCluster()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        local.stopping = True
        raise KeyboardInterrupt

    # SIGINT too: a background job inherits it ignored, and Ctrl-C must stop the cluster anyway.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if metadata_url is None:
            zk_port = ports(zookeeper_port, 1)[0]
            local.add(zookeeper_child(base, zk_port), lambda: _ruok(zk_port), 60)
            metadata_url = f"zk://127.0.0.1:{zk_port}/quire"
        for i, (port, http) in enumerate(zip(ports(bookie_port, bookies), ports(bookie_http_port, bookies)), 1):
            d = base / f"bookie-{i}"
            argv = _quire("bookie", "--metadata-url", metadata_url, "--port", str(port), "--http-port", str(http),
                          "--journal-dir", str(d / "journal"), "--ledger-dirs", str(d / "ledgers"),
                          "--log-level", log_level)
            local.add(Child(f"bookie-{i}", argv, logs / f"bookie-{i}.log", f"127.0.0.1:{port} http :{http}"),
                      lambda http=http: _http_ok(f"http://127.0.0.1:{http}/api/v1/bookie/state"), 60)
        urls = []
        for i, (port, web) in enumerate(zip(ports(broker_port, brokers), ports(web_port, brokers)), 1):
            argv = _quire("broker", "--metadata-url", metadata_url, "--port", str(port), "--web-port", str(web),
                          "--set", f"managed_ledger_default_ensemble_size={quorum}",
                          "--set", f"managed_ledger_default_write_quorum={quorum}",
                          "--set", f"managed_ledger_default_ack_quorum={quorum}", "--log-level", log_level)
            local.add(Child(f"broker-{i}", argv, logs / f"broker-{i}.log",
                            f"pulsar://127.0.0.1:{port} http://127.0.0.1:{web}"),
                      lambda web=web: _http_ok(f"http://127.0.0.1:{web}/admin/v2/clusters"), 90)
            urls.append((port, web))
        service = "pulsar://" + ",".join(f"127.0.0.1:{p}" for p, _ in urls)
        click.echo(f"cluster ready: service URL {service}  admin http://127.0.0.1:{urls[0][1]}  "
                   f"metadata {metadata_url}  (Ctrl-C stops it)", err=True)
        click.echo(f"  try: quire cluster-status --admin-url http://127.0.0.1:{urls[0][1]}", err=True)
        while True:
            dead = local.dead()
            if dead is not None:
                raise ClusterStartError(f"{dead.name} exited with {dead.proc.returncode if dead.proc else '?'} "
                                        f"(log {dead.log}):\n{dead.tail()}")
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo("stopping the cluster", err=True)
        local.stop()
        return
    except BaseException:
        local.stop()
        raise
