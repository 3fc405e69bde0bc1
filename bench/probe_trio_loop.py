"""The event loop's floor under a one-at-a-time message: CPU per request/response round.

A peer thread sends one byte and waits for the one-byte answer, N times, over a socketpair;
the serving side waits for readability, reads and answers, either in a trio task
(``trio.lowlevel.wait_readable``, as quire/socket_io.py's reader does: one trio loop
iteration, an epoll_wait and an epoll_ctl re-arm per round) or in a plain epoll loop
(level-triggered, registered once). The difference is what trio's loop costs per unbatched
SEND before any broker code runs. CPU is the serving thread's own (time.thread_time).

    .venv/bin/python bench/probe_trio_loop.py [--rounds 3] [--messages 20000]
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import threading
import time

import trio


def _peer(sock: socket.socket, n: int) -> None:
    for _ in range(n):
        sock.send(b"x")
        sock.recv(16)


def plain_epoll(n: int) -> float:
    a, b = socket.socketpair()
    a.setblocking(False)
    fd = a.fileno()
    ep = select.epoll()
    ep.register(fd, select.EPOLLIN)
    peer = threading.Thread(target=_peer, args=(b, n))
    peer.start()
    c0 = time.thread_time()
    for _ in range(n):
        ep.poll()
        os.read(fd, 16)
        os.write(fd, b"y")
    cpu = time.thread_time() - c0
    peer.join()
    for s in (a, b):
        s.close()
    ep.close()
    return cpu / n * 1e6


def trio_wait_readable(n: int) -> float:
    a, b = socket.socketpair()
    a.setblocking(False)
    fd = a.fileno()
    peer = threading.Thread(target=_peer, args=(b, n))
    result: list[float] = []

    async def serve() -> None:
        peer.start()
        c0 = time.thread_time()
        for _ in range(n):
            await trio.lowlevel.wait_readable(fd)
            os.read(fd, 16)
            os.write(fd, b"y")
        result.append(time.thread_time() - c0)

    trio.run(serve)
    peer.join()
    for s in (a, b):
        s.close()
    return result[0] / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=20_000)
    args = ap.parse_args()
    plain, loop = [], []
    for rnd in range(args.rounds):
        plain.append(plain_epoll(args.messages))
        loop.append(trio_wait_readable(args.messages))
        print(f"round {rnd}: plain epoll {plain[-1]:.1f} us CPU/round, trio wait_readable {loop[-1]:.1f}", flush=True)
    p, t = statistics.median(plain), statistics.median(loop)
    print(f"median: plain epoll {p:.1f} us CPU/round, trio wait_readable {t:.1f} (+{t - p:.1f} us for the trio loop)")


if __name__ == "__main__":
    main()
