"""Start and stop the compared servers: quire standalone, Redis, RabbitMQ (stream plugin), NATS.

Each runs from its Debian package (quire from this checkout) on loopback ports picked free, with
its data in a temporary directory, as a child process of the benchmark; ``stop`` ends exactly
that process by PID (SIGTERM, then SIGKILL after a grace period). RabbitMQ's Erlang port mapper
(epmd) is started by us on a private port for the same reason, so nothing outlives the run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What "acknowledged" means for each system, as configured here.
DURABILITY = {
    "quire": "ack after the bookie journal write with RWF_DSYNC (data synced to disk)",
    "redis": "appendonly yes, appendfsync always: ack after the AOF write is fsynced",
    "rabbitmq": "stream on one node: ack after the write reaches the OS page cache (no fsync)",
    "nats": "JetStream file storage on one server: ack after the write reaches the OS; fsync on a background interval, not per message",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check: Callable[[], bool], proc: subprocess.Popen, what: str, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}; see {log}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start in {timeout:.0f} s; see {log}")


def _tcp_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


class Server:
    """One child process (and possibly helpers started before it), stopped by PID."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True)
        self.address = ""
        self.procs: list[subprocess.Popen] = []

    def spawn(self, argv: list[str], env: dict[str, str] | None = None, log_name: str = "server.log") -> subprocess.Popen:
        log = open(self.root / log_name, "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the server first, then its helpers
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(10)


def start_quire(root: Path) -> Server:
    s = Server("quire", root)
    port, web = free_port(), free_port()
    proc = s.spawn([sys.executable, "-m", "quire", "standalone", "--data-dir", str(s.root / "data"),
                    "--port", str(port), "--web-port", str(web), "--bind-address", "127.0.0.1",
                    "--advertised-address", "127.0.0.1", "--bookie-port", "0", "--bookie-http-port", "0",
                    "--log-level", "WARNING"],
                   env={"PYTHONPATH": str(REPO)})

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{web}/admin/v2/clusters", timeout=1):
            return True

    _wait(ready, proc, "quire standalone", s.root / "server.log")
    s.address = f"pulsar://127.0.0.1:{port}"
    return s


def start_redis(root: Path) -> Server:
    s = Server("redis", root)
    port = free_port()
    proc = s.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(s.root),
                    "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
                    "--protected-mode", "no"])

    def ready() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
            c.sendall(b"PING\r\n")
            return c.recv(16).startswith(b"+PONG")

    _wait(ready, proc, "redis-server", s.root / "server.log")
    s.address = f"127.0.0.1:{port}"
    return s


def start_nats(root: Path) -> Server:
    s = Server("nats", root)
    port = free_port()
    proc = s.spawn(["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(s.root / "js")])
    _wait(lambda: _tcp_open(port), proc, "nats-server", s.root / "server.log")
    s.address = f"127.0.0.1:{port}"
    return s


def _rabbitmq_bin() -> Path:
    for candidate in (Path("/usr/lib/rabbitmq/bin/rabbitmq-server"),):
        if candidate.exists():
            return candidate
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise RuntimeError("rabbitmq-server is not installed (bash bench/peers/install.sh)")
    return Path(found)


def start_rabbitmq(root: Path) -> Server:
    """A single RabbitMQ node with the stream plugin, its own epmd, cookie, config and data."""
    s = Server("rabbitmq", root)
    epmd_port, amqp, dist, stream = free_port(), free_port(), free_port(), free_port()
    (s.root / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{amqp}\n"
        f"stream.listeners.tcp.1 = 127.0.0.1:{stream}\n"
        "stream.advertised_host = 127.0.0.1\n"
        f"stream.advertised_port = {stream}\n"
        "log.console = true\nlog.console.level = warning\nlog.file = false\n"
    )
    (s.root / "enabled_plugins").write_text("[rabbitmq_stream].\n")
    env = {
        "HOME": str(s.root),  # the Erlang cookie lands here
        "ERL_EPMD_PORT": str(epmd_port),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODENAME": f"peers{amqp}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_CONFIG_FILE": str(s.root / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(s.root / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(s.root / "mnesia"),
        "RABBITMQ_LOG_BASE": str(s.root / "log"),
        "RABBITMQ_PID_FILE": str(s.root / "rabbit.pid"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(s.root / "advanced.config"),
    }
    epmd = s.spawn(["epmd", "-port", str(epmd_port), "-address", "127.0.0.1"], env=env, log_name="epmd.log")
    _wait(lambda: _tcp_open(epmd_port), epmd, "epmd", s.root / "epmd.log", timeout=20)
    proc = s.spawn([str(_rabbitmq_bin())], env=env)
    _wait(lambda: _tcp_open(stream), proc, "rabbitmq-server", s.root / "server.log", timeout=120)
    s.address = f"127.0.0.1:{stream}"
    return s


STARTERS: dict[str, Callable[[Path], Server]] = {
    "quire": start_quire,
    "redis": start_redis,
    "rabbitmq": start_rabbitmq,
    "nats": start_nats,
}
