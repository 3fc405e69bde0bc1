"""Raw Pulsar-protocol access to a live broker for robustness tests: frames built with
``clients.protocol`` and sent over a plain socket, so a test can send what no client would.

``assert_serving`` is the liveness probe: the process is running, a new connection gets
CONNECTED and a LOOKUP is answered.
"""

from __future__ import annotations

import itertools
import socket
import time
from typing import Callable

from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb

T = pb.BaseCommand
_request_ids = itertools.count(1_000_000)


def next_request_id() -> int:
    return next(_request_ids)


def connect_frame(protocol_version: int = 20) -> bytes:
    return frames.encode_command(C.connect("raw-test", protocol_version=protocol_version))


class RawConnection:
    """A blocking socket that sends commands and collects decoded replies."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.decoder = frames.FrameDecoder()
        self.received: list[frames.Frame] = []
        self.eof = False

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, *items: pb.BaseCommand | bytes) -> None:
        self.sock.sendall(b"".join(i if isinstance(i, bytes) else frames.encode_command(i) for i in items))

    def _receive(self, until: float) -> bool:
        """Read once; False at EOF or when ``until`` passed with nothing read."""
        if self.eof:
            return False
        self.sock.settimeout(max(0.01, until - time.monotonic()))
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.received.extend(self.decoder.feed(chunk))
        return True

    def wait_for(self, kind: int, match: Callable[[frames.Frame], bool] | None = None,
                 timeout: float = 15.0) -> frames.Frame:
        """The first received frame of type ``kind`` (and ``match``); consumed from the list."""
        deadline = time.monotonic() + timeout
        while True:
            for i, f in enumerate(self.received):
                if f.command.type == kind and (match is None or match(f)):
                    return self.received.pop(i)
            if time.monotonic() >= deadline or not self._receive(deadline):
                types = [C.type_name(f.command) for f in self.received]
                raise AssertionError(f"no {T.Type.Name(kind)} within {timeout}s (eof={self.eof}, got {types})")

    def wait_closed(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            self._receive(deadline)
        return self.eof

    def handshake(self, protocol_version: int = 20) -> pb.CommandConnected:
        self.send(connect_frame(protocol_version))
        return self.wait_for(T.CONNECTED).command.connected

    def create_producer(self, topic: str, producer_id: int = 1, name: str = "raw-p") -> pb.CommandProducerSuccess:
        rid = next_request_id()
        self.send(C.producer(topic, producer_id, rid, producer_name=name))
        return self.wait_for(T.PRODUCER_SUCCESS, lambda f: f.command.producer_success.request_id == rid).command.producer_success

    def lookup(self, topic: str) -> pb.CommandLookupTopicResponse:
        rid = next_request_id()
        self.send(C.lookup(topic, rid))
        return self.wait_for(T.LOOKUP_RESPONSE, lambda f: f.command.lookupTopicResponse.request_id == rid).command.lookupTopicResponse


def exchange(port: int, data: bytes, read_for: float = 0.2, until: int | None = None) -> list[frames.Frame]:
    """Send raw bytes; collect decodable replies until the broker closes or goes quiet."""
    out: list[frames.Frame] = []
    decoder = frames.FrameDecoder()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
        except OSError:
            return out
        deadline = time.monotonic() + read_for
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out.extend(decoder.feed(chunk))
            if until is not None and any(f.command.type == until for f in out):
                break
    return out


def assert_serving(port: int, proc: object | None = None) -> None:
    """Liveness probe: process running, CONNECT -> CONNECTED, a LOOKUP answered Connect."""
    if proc is not None:
        assert getattr(proc, "is_running"), f"the broker process exited ({getattr(proc, 'returncode')})"
    with RawConnection(port) as conn:
        conn.handshake()
        reply = conn.lookup("persistent://public/default/liveness-probe")
        assert reply.response == pb.CommandLookupTopicResponse.Connect, reply
