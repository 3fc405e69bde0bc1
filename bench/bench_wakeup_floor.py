"""The floor under a cluster hop's CPU: what one request/reply over loopback TCP costs a trio
server process that does nothing else (wait readable, read, write the reply), as the bookie
does per add and the broker per bookie reply, measured as the server's CPU per round trip
(/proc/PID/stat, all threads) over N one-at-a-time round trips, and the trio server's own split
of it (thread CPU time): its handler step, epoll_wait, and trio's loop around them. Compare a bookie's CPU per add
(bench/profile_cluster_add.py) with it: the difference is the add's own work.

    .venv/bin/python bench/bench_wakeup_floor.py [--n 5000] [--size 180] [--rate 500] [--server plain]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

_SERVER = r"""
import os, sys, time, trio
from trio._core import _io_epoll
tt = time.thread_time_ns
in_epoll = [0]
_get_events = _io_epoll.EpollIOManager.get_events
def get_events(self, timeout):  # the time in epoll_wait, for the split
    t = tt()
    try:
        return _get_events(self, timeout)
    finally:
        in_epoll[0] += tt() - t
_io_epoll.EpollIOManager.get_events = get_events
async def main():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    async def handle(stream):
        fd = stream.socket.fileno()
        n = handler = 0
        start = tt()
        while True:
            await trio.lowlevel.wait_readable(fd)
            t = tt()
            data = os.read(fd, 65536)
            if not data:
                break
            os.write(fd, data[:24])
            n += 1
            if n == 200:  # warmed up: measure from here
                start, handler, in_epoll[0] = tt(), 0, 0
            elif n > 200:
                handler += tt() - t
        total, n = tt() - start, max(n - 200, 1)
        print(f"{total / n / 1e3:.1f} {handler / n / 1e3:.1f} {in_epoll[0] / n / 1e3:.1f}", flush=True)
    await trio.serve_listeners(handle, listeners)
trio.run(main)
"""

# The same without trio: a blocking read in a plain loop (what a wake-up costs the kernel and
# the interpreter alone).
_PLAIN = r"""
import os, socket
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
fd = conn.fileno()
while True:
    data = os.read(fd, 65536)
    if not data:
        break
    os.write(fd, data[:24])
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sys_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--size", type=int, default=180)
    ap.add_argument("--rate", type=float, default=500.0, help="round trips per second (0: back to back)")
    ap.add_argument("--server", choices=("trio", "plain"), default="trio",
                    help="plain: a blocking read loop without trio, for comparison")
    args = ap.parse_args()
    code = _SERVER if args.server == "trio" else _PLAIN
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = os.urandom(args.size)
        for _ in range(200):
            sock.sendall(payload)
            sock.recv(65536)
        interval = 1.0 / args.rate if args.rate else 0.0
        lat = []
        cpu0, sys0 = cpu_seconds(server.pid), sys_seconds(server.pid)
        next_at = time.perf_counter()
        for _ in range(args.n):
            if interval:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                next_at += interval
            t0 = time.perf_counter()
            sock.sendall(payload)
            sock.recv(65536)
            lat.append(time.perf_counter() - t0)
        cpu = (cpu_seconds(server.pid) - cpu0) / args.n * 1e6
        sys_cpu = (sys_seconds(server.pid) - sys0) / args.n * 1e6
        lat.sort()
        print(f"{args.server} server CPU {cpu:.0f} µs per round trip (system {sys_cpu:.0f}) | round trip p50 {lat[len(lat) // 2] * 1e6:.0f} "
              f"p99 {lat[int(len(lat) * 0.99)] * 1e6:.0f} µs | load {os.getloadavg()[0]:.1f}")
        sock.close()
        if args.server == "trio":  # the server's own split of its event-loop thread's CPU
            total, handler, epoll = map(float, server.stdout.readline().split())
            print(f"  trio thread CPU per round trip {total:.0f} µs: handler step (read, write, its Python) "
                  f"{handler:.0f}, epoll_wait {epoll:.0f}, trio's loop and wait_readable {total - handler - epoll:.0f}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
