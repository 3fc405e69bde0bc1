"""Reads and writes of a plain trio ``SocketStream`` on its raw fd, without trio's per-call
socket machinery (conflict detector, error translation and ``_try_sync`` context managers, a
scheduler yield after every send that succeeds at once): on the one-message-at-a-time publish
path that machinery cost more CPU than the system calls themselves.

:func:`stream_fd` gives the fd of a plain socket stream (None for TLS or any other stream:
those keep the stream's own methods). :func:`receive_some` reads like ``receive_some`` of the
stream and raises the same trio exceptions (BrokenResourceError for a socket error,
ClosedResourceError once the stream is closed); :func:`read_now` reads only what is there
already, without waiting or yielding.
"""

from __future__ import annotations

import os

import trio


def stream_fd(stream: trio.abc.Stream) -> int | None:
    """The socket fd of a plain ``trio.SocketStream``; None for every other stream."""
    if type(stream) is not trio.SocketStream:
        return None
    return stream.socket.fileno()


async def receive_some(stream: trio.SocketStream, fd: int, max_bytes: int) -> bytes:
    """``stream.receive_some(max_bytes)`` for a plain socket stream whose fd is ``fd``.

    Waits for the fd first, then reads: unlike trio's read-first, a reader that has just
    handled its peer's request does not pay a failed read (a system call and a
    BlockingIOError) before it parks; data already there costs one scheduler round either way.
    """
    sock = stream.socket
    if sock.fileno() != fd:  # closed (an fd number may be reused: never read it then)
        raise trio.ClosedResourceError("this stream was closed")
    while True:
        await trio.lowlevel.wait_readable(fd)  # ClosedResourceError if closed meanwhile
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


def read_now(stream: trio.SocketStream, fd: int, max_bytes: int) -> bytes | None:
    """What :func:`receive_some` would return if the peer's bytes are there already (b"" at
    its end), else None, without waiting and without a scheduler round: for a reader that has
    just answered its peer and expects the next request at once (one failed ``read`` when it is
    not there). Raises as :func:`receive_some` does."""
    if stream.socket.fileno() != fd:
        raise trio.ClosedResourceError("this stream was closed")
    try:
        return os.read(fd, max_bytes)
    except BlockingIOError:
        return None
    except OSError as exc:
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


async def receive_into(stream: trio.SocketStream, fd: int, buffer: memoryview) -> int:
    """Like :func:`receive_some` but into ``buffer`` (bytes received; 0 at the peer's end):
    a large frame's rest goes straight into the frame's own buffer, with no copy in between."""
    sock = stream.socket
    if sock.fileno() != fd:
        raise trio.ClosedResourceError("this stream was closed")
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.readv(fd, (buffer,))
        except BlockingIOError:
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
