"""A connection closed while its reader still handles frames of one read ends quietly.

Found by a 30-minute chaos run (seed 21): a PING that came in the same read as a frame whose
handling closed the connection was answered with a PONG on the closed connection, which raised
NotConnected out of the reader: the connection ended as an "internal error" with a logged
traceback (ERROR clients.connection: connection ... failed) instead of as a plain close.
"""

from __future__ import annotations

import logging

import pytest
import trio

from clients.connection import ClientConnection, ConnectionConfig
from clients.protocol import commands as cmds
from clients.protocol import frames


class _ClosesOnDisconnect:
    def __init__(self, cnx: ClientConnection) -> None:
        self.cnx = cnx

    def _on_disconnected(self, cnx: ClientConnection) -> None:
        self.cnx.close("the producer closed it")


async def test_a_ping_after_a_close_in_the_same_read_ends_the_connection_quietly(caplog: pytest.LogCaptureFixture) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def serve(stream: trio.SocketStream) -> None:
        decoder = frames.FrameDecoder()
        while not decoder.feed(await stream.receive_some(65536)):
            pass  # CONNECT
        await stream.send_all(frames.encode_command(cmds.connected("fake", 19)))
        await trio.sleep(0.05)
        # One write: the first frame's handling closes the connection, then a PING follows.
        await stream.send_all(frames.encode_command(cmds.close_producer(7, 1)) + frames.encode_command(cmds.ping()))
        await trio.sleep(1)

    caplog.set_level(logging.INFO, logger="clients.connection")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        cnx = ClientConnection(f"pulsar://127.0.0.1:{port}", stream, ConnectionConfig())
        await cnx.handshake()
        cnx.register_producer(7, _ClosesOnDisconnect(cnx))  # type: ignore[arg-type]
        with trio.fail_after(5):
            await cnx.run()
        nursery.cancel_scope.cancel()
    assert cnx.close_reason == "the producer closed it"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
