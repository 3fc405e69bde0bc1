"""quire.outbox with a direct socket write and deferred_writes, quire.socket_io reads and
quire.input_batch, over real socket pairs."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
from typing import AsyncIterator

import pytest
import trio
import trio.testing

from quire import socket_io
from quire.outbox import Outbox, deferred_writes


def _stream_pair() -> tuple[trio.SocketStream, socket.socket]:
    a, b = socket.socketpair()
    b.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(a)), b


def _drain(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


@contextlib.asynccontextmanager
async def _running_outbox(sndbuf: int = 0) -> AsyncIterator[tuple[Outbox, socket.socket]]:
    """An outbox writing on one end of a socket pair (its writer task running, parked); the
    other end, non-blocking."""
    stream, peer = _stream_pair()
    fd = socket_io.stream_fd(stream)
    assert fd is not None
    if sndbuf:
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    outbox = Outbox(write=functools.partial(os.write, fd))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(outbox.run, stream.send_all)
            await trio.testing.wait_all_tasks_blocked()
            yield outbox, peer
            nursery.cancel_scope.cancel()
    finally:
        peer.close()
        await stream.aclose()


async def test_deferred_writes_send_at_block_end_without_the_writer_task() -> None:
    async with _running_outbox() as (outbox, peer):
        with deferred_writes():
            outbox.put(b"one")
            with deferred_writes():  # nested: joins the outer block
                outbox.put_many([b"two", b"three"])
            assert _drain(peer) == b""  # nothing written before the outer block ends
        # Written by the block's end itself: no checkpoint has let the writer task run.
        assert _drain(peer) == b"onetwothree"
        assert outbox.idle and outbox.queued_bytes == 0
        outbox.put(b"four")  # outside a block: the writer task sends it
        await trio.testing.wait_all_tasks_blocked()
        assert _drain(peer) == b"four"


async def test_a_write_the_socket_does_not_take_is_finished_by_the_writer_in_order() -> None:
    frames = [bytes([i]) * 50_000 for i in range(20)]  # far more than the socket buffers
    got = bytearray()
    async with _running_outbox(sndbuf=4096) as (outbox, peer):
        with deferred_writes():
            outbox.put_many(frames[:10])
        for f in frames[10:]:
            outbox.put(f)
        while len(got) < 1_000_000:
            await trio.lowlevel.wait_readable(peer)
            got += _drain(peer)
        await trio.testing.wait_all_tasks_blocked()
        assert outbox.idle and outbox.queued_bytes == 0
    assert bytes(got) == b"".join(frames)


async def test_a_closed_outbox_writes_nothing_at_block_end() -> None:
    async with _running_outbox() as (outbox, peer):
        with deferred_writes():
            outbox.put(b"late")
            outbox.close()  # the connection went away inside the block
        assert _drain(peer) == b""


@contextlib.asynccontextmanager
async def _reset_connection() -> AsyncIterator[tuple[trio.SocketStream, int]]:
    """The server end of a loopback TCP connection whose client reset it (RST), and its fd."""
    with trio.socket.socket() as listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = trio.socket.socket()
        await client.connect(listener.getsockname())
        server_sock, _ = await listener.accept()
        server = trio.SocketStream(server_sock)
        sfd = socket_io.stream_fd(server)
        assert sfd is not None
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # RST
        try:
            yield server, sfd
        finally:
            await server.aclose()


async def test_receive_some_reads_waits_and_sees_eof() -> None:
    stream, peer = _stream_pair()
    fd = socket_io.stream_fd(stream)
    assert fd is not None
    peer.send(b"ready")
    assert await socket_io.receive_some(stream, fd, 100) == b"ready"  # there already
    async with trio.open_nursery() as nursery:
        got: list[bytes] = []

        async def reader() -> None:
            got.append(await socket_io.receive_some(stream, fd, 100))
            got.append(await socket_io.receive_some(stream, fd, 100))

        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        peer.send(b"later")
        await trio.testing.wait_all_tasks_blocked()
        peer.close()
    assert got == [b"later", b""]
    await stream.aclose()


async def test_receive_some_raises_trios_errors() -> None:
    stream, peer = _stream_pair()
    fd = socket_io.stream_fd(stream)
    assert fd is not None
    # A reset connection: trio's BrokenResourceError, as from stream.receive_some.
    async with _reset_connection() as (server, sfd):
        with pytest.raises(trio.BrokenResourceError):
            while await socket_io.receive_some(server, sfd, 100):
                pass
    # Closed by another task while a reader waits: ClosedResourceError.
    async with trio.open_nursery() as nursery:
        errors: list[BaseException] = []

        async def reader() -> None:
            try:
                await socket_io.receive_some(stream, fd, 100)
            except trio.ClosedResourceError as exc:
                errors.append(exc)

        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        await stream.aclose()
    assert len(errors) == 1
    with pytest.raises(trio.ClosedResourceError):  # and any read after the close
        await socket_io.receive_some(stream, fd, 100)
    peer.close()


async def test_read_now_takes_what_is_there_without_waiting() -> None:
    stream, peer = _stream_pair()
    fd = socket_io.stream_fd(stream)
    assert fd is not None
    assert socket_io.read_now(stream, fd, 100) is None  # nothing there: no wait, no error
    peer.send(b"there")
    assert socket_io.read_now(stream, fd, 100) == b"there"
    peer.close()
    assert socket_io.read_now(stream, fd, 100) == b""  # the peer's end
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        socket_io.read_now(stream, fd, 100)
    # A reset connection: BrokenResourceError, as from receive_some.
    async with _reset_connection() as (server, sfd):
        with pytest.raises(trio.BrokenResourceError):
            with trio.fail_after(5):
                while socket_io.read_now(server, sfd, 100) is None:
                    await trio.sleep(0.001)


def test_stream_fd_only_for_plain_socket_streams() -> None:
    a, b = socket.socketpair()
    with a, b:
        plain = trio.SocketStream(trio.socket.from_stdlib_socket(a))
        assert socket_io.stream_fd(plain) == a.fileno()
        assert socket_io.stream_fd(trio.testing.MemorySendStream()) is None  # type: ignore[arg-type]


async def test_an_input_batch_met_by_another_task_is_an_invariant_violation() -> None:
    from quire import input_batch, invariants

    class Target:
        flushed = 0

        def flush_deferred(self) -> None:
            self.flushed += 1

    target = Target()
    input_batch.begin()
    try:
        assert input_batch.defer(target)  # the task that opened it
        errors: list[BaseException] = []

        async def other() -> None:
            try:
                input_batch.defer(Target())
            except invariants.InvariantViolation as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:  # a yield with the batch open: the bug
            nursery.start_soon(other)
        assert len(errors) == (1 if invariants.ENABLED else 0)
    finally:
        input_batch.end()
    assert target.flushed == 1
    assert not input_batch.defer(target)  # closed
