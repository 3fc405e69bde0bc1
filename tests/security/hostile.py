"""Hostile HTTP(S) connections for the tests that a server survives them: garbage instead of a
TLS ClientHello, a reset in the middle of the handshake or right after it, plain HTTP sent to
the HTTPS port, a client certificate of an untrusted CA, a connection reset before a byte."""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path
from typing import Callable

from tests.security.certs import Issued

HOST = "127.0.0.1"


def _connect(port: int) -> socket.socket:
    return socket.create_connection((HOST, port), timeout=5)


def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST (SO_LINGER 0) instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _drain(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def client_hello() -> bytes:
    """The bytes of a real TLS ClientHello (from an SSLObject over memory BIOs)."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def garbage(port: int) -> None:
    with _connect(port) as s:
        s.sendall(b"\x16\x03\x01\xff\xff" + b"\x00garbage\r\n" * 200)
        _drain(s)


def reset_before_a_byte(port: int) -> None:
    _reset(_connect(port))


def reset_mid_handshake(port: int) -> None:
    hello = client_hello()
    s = _connect(port)
    s.sendall(hello[: len(hello) // 2])
    _reset(s)


def reset_after_client_hello(port: int) -> None:
    s = _connect(port)
    s.sendall(client_hello())
    _drain(s)  # the ServerHello (or an alert)
    _reset(s)


def plain_http_to_tls(port: int) -> None:
    with _connect(port) as s:
        s.sendall(b"GET /admin/v2/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        _drain(s)


def reset_after_handshake(port: int, ca: Path) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    s = ctx.wrap_socket(_connect(port))
    _reset(s)  # an RST, no close_notify


def untrusted_client_cert(port: int, ca: Path, rogue: Issued) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(rogue.cert), str(rogue.key))
    try:
        with ctx.wrap_socket(_connect(port)) as s:
            s.sendall(b"GET /admin/v2/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            _drain(s)
    except (ssl.SSLError, OSError):
        pass  # refused in the handshake: expected


def attacks(port: int, ca: Path, rogue: Issued, *, tls: bool) -> list[Callable[[], None]]:
    """Every hostile connection for one port (TLS ones only when it serves TLS)."""
    out: list[Callable[[], None]] = [lambda: garbage(port), lambda: reset_before_a_byte(port),
                                     lambda: reset_mid_handshake(port), lambda: reset_after_client_hello(port)]
    if tls:
        out += [lambda: plain_http_to_tls(port), lambda: reset_after_handshake(port, ca),
                lambda: untrusted_client_cert(port, ca, rogue)]
    return out
