"""Unix stream sockets in Linux's abstract namespace, between processes on one host.

A bookie listens on one beside its TCP port (:func:`listen`) and advertises the name in its
registration; a ledger client that reads the name there connects to it (:func:`connect`)
instead of loopback TCP. Only a process in the same network namespace can reach an abstract
name, so a successful connect is itself the proof that the bookie is local: a client on another
host gets ECONNREFUSED and uses TCP. A loopback TCP round trip costs both ends more CPU in the
kernel than a Unix socket's (bench/results/cluster_latency_17f.md: a 200 B write 17.6-22.7 vs
10.0-11.5 µs).

An abstract name has no file: nothing to clean up, and it vanishes with the process that bound
it. The random part keeps another local process from binding the name first (a client connects
only to the name the bookie registered).
"""

from __future__ import annotations

import os
import secrets
import socket

import trio

__all__ = ["SUPPORTED", "connect", "listen", "new_name"]

SUPPORTED = hasattr(socket, "AF_UNIX") and os.uname().sysname == "Linux"  # abstract names: Linux only


def new_name(role: str) -> str:
    """A fresh abstract name (without its leading NUL) for one process's listener."""
    return f"quire-{role}-{os.getpid()}-{secrets.token_hex(8)}"


async def listen(name: str, backlog: int = 128) -> trio.SocketListener:
    """A listener on the abstract name ``name``; raises OSError if it cannot be bound."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind("\0" + name)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


async def connect(name: str) -> trio.SocketStream:
    """A stream to the abstract name ``name``; OSError (ECONNREFUSED) when nobody in this
    network namespace listens there, e.g. the name is another host's."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.connect("\0" + name)
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)
