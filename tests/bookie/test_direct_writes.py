"""The cluster add path's two socket writes leave at once, not one scheduler round later.

On an idle plain-TCP connection the ledger client writes an add to the bookie, and the bookie
server writes an add's reply, from the code that makes them (the add, the journal group's
completion) instead of waking the connection's writer task. Each test blocks the event loop
right after the call, so the writer task cannot run: the bytes can only reach the peer if the
caller wrote them itself. Real loopback sockets, no fakes.
"""

from __future__ import annotations

import select
import socket

import trio
import trio.testing

from bookie.client import ClientConfig
from bookie.client.bookie_connection import BookieConnection
from bookie.protocol import FrameDecoder, Status, decode_request, decode_response, encode_add_reply
from bookie.server import Connection

MASTER_KEY = b"k" * 20


def _arrives_without_yielding(sock: socket.socket, timeout: float = 1.0) -> bytes:
    """What ``sock`` receives within ``timeout`` while this thread (the event loop) blocks."""
    readable, _, _ = select.select([sock], [], [], timeout)
    return sock.recv(65536) if readable else b""


async def _accept_first_frames(listener: socket.socket) -> tuple[socket.socket, FrameDecoder, list[bytes]]:
    """The bookie side of a fresh ledger-client connection: accept it and read its first frames."""
    while True:
        try:
            peer, _ = listener.accept()
            break
        except BlockingIOError:
            await trio.sleep(0.005)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    with trio.fail_after(5):
        while not frames:
            await trio.sleep(0.005)
            try:
                frames = decoder.feed(peer.recv(65536, socket.MSG_DONTWAIT))
            except BlockingIOError:
                pass
    return peer, decoder, frames


async def test_an_add_on_an_idle_connection_is_written_by_send_add_itself() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.setblocking(False)
    config = ClientConfig(add_entry_timeout_s=5.0, client_connect_timeout_ms=2000)
    replies: list[int] = []
    async with trio.open_nursery() as nursery:
        conn = BookieConnection(f"127.0.0.1:{port}", nursery, config)
        try:
            # The first add connects (queued until then) and is sent by the writer task.
            conn.send_add(1, 0, 0, MASTER_KEY, b"first", lambda status, _r: replies.append(status), 5.0)
            peer, decoder, frames = await _accept_first_frames(listener)
            first = decode_request(frames[0])
            peer.sendall(_reply_frame(first.request_id, 0))
            with trio.fail_after(5):
                while not replies:
                    await trio.sleep(0.005)
            assert replies == [int(Status.OK)]
            await trio.sleep(0.01)  # the writer task is parked again: the connection is idle
            assert conn._outbox._writer is not None

            conn.send_add(1, 1, 0, MASTER_KEY, b"second", lambda status, _r: replies.append(status), 5.0)
            # written, and the parked writer task left alone (no scheduler round for nothing)
            assert conn._outbox._writer is not None
            data = _arrives_without_yielding(peer)  # the event loop is blocked meanwhile

            second = [decode_request(f) for f in decoder.feed(data)]
            assert [(r.ledger_id, r.entry_id) for r in second] == [(1, 1)]
        finally:
            conn.close()
            listener.close()
            nursery.cancel_scope.cancel()


def _reply_frame(request_id: int, entry_id: int) -> bytes:
    return encode_add_reply(request_id, int(Status.OK), 1, entry_id)


async def test_a_reply_on_an_idle_bookie_connection_is_written_by_its_sender() -> None:
    a, b = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    try:
        conn = Connection(stream, max_pending=10)
        conn.pending = 2  # two requests taken by the reader (each reply decrements it)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.writer, nursery.cancel_scope)
            await trio.testing.wait_all_tasks_blocked()  # the writer task is parked
            conn.send_many([_reply_frame(7, 0)], 1)  # a journal group's completion
            assert _arrives_without_yielding(b) == _reply_frame(7, 0)
            conn.send(_reply_frame(8, 1))  # an inline reply (an error, a cached read)
            assert _arrives_without_yielding(b) == _reply_frame(8, 1)
            assert conn.out_bytes == 0
            # the parked writer task was left alone: waking it would cost a scheduler round
            assert conn.outbox._writer is not None
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()
        b.close()


async def _receive_all(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``, polled while the event loop (the writer task) runs."""
    received = bytearray()
    sock.setblocking(False)
    with trio.fail_after(10):
        while len(received) < n:
            try:
                received += sock.recv(1 << 20)
            except BlockingIOError:
                await trio.sleep(0.001)
    return bytes(received)


async def test_a_reply_the_socket_does_not_take_is_left_to_the_writer_in_order() -> None:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    frames = [encode_add_reply(i, 0, 1, i) for i in range(20_000)]
    expected = b"".join(frames)
    try:
        conn = Connection(stream, max_pending=len(frames) + 1)
        conn.pending = len(frames)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.writer, nursery.cancel_scope)
            for i in range(0, len(frames), 1000):  # groups, while the peer does not read yet
                conn.send_many(frames[i : i + 1000], 1000)
            assert 0 < conn.out_bytes < len(expected)  # the socket took part, the rest is queued
            assert await _receive_all(b, len(expected)) == expected
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()
        b.close()


async def test_a_large_reply_is_left_to_the_writer_task() -> None:
    """A range-read reply of megabytes goes through the writer's send_all (a partly sent frame
    continues there without a copy of its rest), and still arrives whole."""
    a, b = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    big = bytes(range(256)) * 4096  # 1 MiB
    try:
        conn = Connection(stream, max_pending=10)
        conn.pending = 1
        conn.send(big)
        assert conn.out_bytes == len(big)  # nothing written by the caller
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.writer, nursery.cancel_scope)
            assert await _receive_all(b, len(big)) == big
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()
        b.close()


async def test_a_range_reply_in_parts_is_written_by_its_sender_and_the_rest_in_order() -> None:
    """A range read's reply given as parts (head + entry views) leaves in one vectored write
    from the sender; what the socket does not take is queued for the writer after it, and a
    frame sent next follows it: the peer gets every byte in order."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    buffer = bytes(range(256)) * 2048
    view = memoryview(buffer)
    parts: list[bytes | memoryview] = [b"head", *(view[i:i + 3000] for i in range(0, len(buffer), 3000))]
    small = encode_add_reply(7, 0, 1, 7)
    expected = b"".join(parts) + small
    try:
        conn = Connection(stream, max_pending=10)
        conn.pending = 2
        conn.send_parts(parts, len(expected) - len(small))
        assert 0 < conn.out_bytes < len(expected) - len(small)  # a part written, the rest queued
        conn.send(small)
        assert conn.pending == 0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.writer, nursery.cancel_scope)
            assert await _receive_all(b, len(expected)) == expected
            nursery.cancel_scope.cancel()
        conn.pending = 1
        conn.send_parts([b"x", view[:100]], 101)  # taken whole: nothing queued
        assert conn.out_bytes == 0 and conn.pending == 0
        assert await _receive_all(b, 101) == b"x" + buffer[:100]
    finally:
        await stream.aclose()
        b.close()


async def test_a_receipt_made_by_an_add_reply_is_written_by_the_ledger_client_reader() -> None:
    """The third hop: a bookie's add reply completes the add, and what that completion puts
    in a client connection's outbox (the broker's receipt) is written by the ledger client's
    reader when it has handled the replies it read, not one scheduler round later by that
    outbox's writer task."""
    from tests.test_connection_io import _running_outbox

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.setblocking(False)
    config = ClientConfig(add_entry_timeout_s=5.0, client_connect_timeout_ms=2000)
    writers: list[str] = []
    async with _running_outbox() as (outbox, receipts_peer), trio.open_nursery() as nursery:
        write = outbox._write
        assert write is not None

        def recording_write(data: bytes) -> int:
            writers.append(trio.lowlevel.current_task().name)
            return write(data)

        outbox._write = recording_write
        conn = BookieConnection(f"127.0.0.1:{port}", nursery, config)
        try:
            conn.send_add(1, 0, 0, MASTER_KEY, b"e", lambda status, _r: outbox.put(b"receipt"), 5.0)
            peer, decoder, frames = await _accept_first_frames(listener)
            peer.sendall(_reply_frame(decode_request(frames[0]).request_id, 0))
            assert await _receive_all(receipts_peer, len(b"receipt")) == b"receipt"
            assert writers and all("BookieConnection" in name for name in writers), writers
        finally:
            conn.close()
            listener.close()
            nursery.cancel_scope.cancel()


async def test_the_adds_of_one_read_are_made_durable_by_the_bookie_reader_itself(tmp_path) -> None:
    """The bookie's hop: the adds decoded from one socket read are one input batch
    (quire/input_batch.py), so their journal group is written, synced and answered by the
    connection's reader in its own task step, not by the journal's writer task one scheduler
    round later. Real bookie, real socket."""
    from bookie.bookie import Bookie
    from bookie.protocol import encode_add_request
    from tests.bookie.helpers import entry, make_config

    async with trio.open_nursery() as nursery:
        bookie = Bookie(make_config(tmp_path), None)
        await bookie.start(nursery)
        journal = bookie.journal
        flushed_by: list[str] = []
        flush = journal.flush_deferred

        def recording_flush() -> None:
            flushed_by.append(trio.lowlevel.current_task().name)
            flush()

        journal.flush_deferred = recording_flush  # type: ignore[method-assign]
        sock = socket.create_connection(("127.0.0.1", bookie.port))
        try:
            for round_ in range(2):
                frames = [encode_add_request(3 * round_ + i + 1, 1, 3 * round_ + i, 0, MASTER_KEY,
                                             entry(1, 3 * round_ + i, b"x")) for i in range(3)]
                sock.sendall(b"".join(frames))  # one write: (almost always) one read at the bookie
                replies = await _receive_all(sock, 3 * len(_reply_frame(0, 0)))
                decoder = FrameDecoder()
                assert [decode_response(f).status for f in decoder.feed(replies)] == [Status.OK] * 3
            # flush_deferred runs only from input_batch.end(): a connection's reader wrote the group
            assert flushed_by and not any("Journal" in name for name in flushed_by), flushed_by
        finally:
            sock.close()
            await bookie.close()
            nursery.cancel_scope.cancel()
