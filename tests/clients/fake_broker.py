"""A scripted in-process Pulsar broker for client unit tests (built on ``clients.protocol``).

It serves one topic from memory: lookups answer Connect to itself, SENDs are stored and get
receipts (unless ``hold_receipts``), subscriptions get MESSAGE frames within their FLOW permits.
Every command it receives is recorded so tests can assert on the exact wire behaviour
(grouped ACKs, FLOW sizes, re-sent sequence ids) and ``drop_connections()`` simulates a broker loss.
"""

from __future__ import annotations

from typing import Any

import trio

from clients.protocol import commands as c
from clients.protocol import frames
from clients.protocol.pulsar_api_pb2 import BaseCommand

T = BaseCommand.Type


class FakeBroker:
    def __init__(self) -> None:
        self.port = 0
        self.received: list[BaseCommand] = []
        self.entries: list[bytes] = []  # stored entries, entry id = index
        self.hold_receipts = False
        self.receipt_partition: int | None = None  # set: receipts carry it (not the lone-receipt shape)
        self.max_message_size: int | None = None
        self.redirect_to: str | None = None  # answer lookups with Redirect to this URL
        self.corrupt_entries: set[int] = set()  # entry ids dispatched with a flipped payload byte
        self.after_receipt: dict[int, bytes] = {}  # sequence id -> frames written with its receipt
        self.reply_delay = 0.0  # seconds each answer waits before it is written
        self._streams: list[trio.SocketStream] = []
        self._consumers: dict[int, dict[str, Any]] = {}
        self._cancel = trio.CancelScope()

    def commands(self, kind: int) -> list[Any]:
        return [c.sub_command(cmd) for cmd in self.received if cmd.type == kind]

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with self._cancel:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            task_status.started()
            await trio.serve_listeners(self._serve, listeners)

    def stop(self) -> None:
        self._cancel.cancel()

    def drop_connections(self) -> None:
        for stream in self._streams:
            stream.socket.close()
        self._streams.clear()

    async def _serve(self, stream: trio.SocketStream) -> None:
        self._streams.append(stream)
        decoder = frames.FrameDecoder()
        out: list[bytes] = []
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                for frame in decoder.feed(data):
                    self.received.append(frame.command)
                    self._handle(frame, out)
                if out:
                    if self.reply_delay:
                        await trio.sleep(self.reply_delay)
                    await stream.send_all(b"".join(out))
                    out.clear()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return

    def _pump(self, consumer_id: int, out: list[bytes]) -> None:
        state = self._consumers[consumer_id]
        while state["permits"] > 0 and state["next"] < len(self.entries):
            entry_id = state["next"]
            entry = self.entries[entry_id]
            if entry_id in self.corrupt_entries:
                entry = entry[:-1] + bytes([entry[-1] ^ 0xFF])
            out.append(frames.message_frame(c.message(consumer_id, 1, entry_id), entry))
            state["permits"] -= frames.parse_entry(entry).num_messages
            state["next"] += 1

    def _handle(self, frame: frames.Frame, out: list[bytes]) -> None:
        cmd = frame.command
        sub = c.sub_command(cmd)
        t = cmd.type
        if t == T.CONNECT:
            out.append(frames.encode_command(c.connected("fake", 20, max_message_size=self.max_message_size)))
        elif t == T.PARTITIONED_METADATA:
            out.append(frames.encode_command(c.partitioned_metadata_response(sub.request_id, 0)))
        elif t == T.LOOKUP:
            if self.redirect_to is not None and not sub.authoritative:
                reply = c.lookup_response(sub.request_id, broker_service_url=self.redirect_to, redirect=True)
            else:
                reply = c.lookup_response(sub.request_id, broker_service_url=self.url)
            out.append(frames.encode_command(reply))
        elif t == T.PRODUCER:
            out.append(frames.encode_command(c.producer_success(sub.request_id, sub.producer_name or "fake-1")))
        elif t == T.SEND:
            self.entries.append(frame.stored_entry())
            if not self.hold_receipts:
                out.append(frames.encode_command(
                    c.send_receipt(sub.producer_id, sub.sequence_id, 1, len(self.entries) - 1,
                                   partition=self.receipt_partition)))
                out.append(self.after_receipt.pop(sub.sequence_id, b""))
            for consumer_id in self._consumers:
                self._pump(consumer_id, out)
        elif t == T.SUBSCRIBE:
            self._consumers[sub.consumer_id] = {"permits": 0, "next": 0}
            out.append(frames.encode_command(c.success(sub.request_id)))
        elif t == T.FLOW:
            self._consumers[sub.consumer_id]["permits"] += sub.messagePermits
            self._pump(sub.consumer_id, out)
        elif t in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.UNSUBSCRIBE):
            out.append(frames.encode_command(c.success(sub.request_id)))
        elif t == T.PING:
            out.append(frames.encode_command(c.pong()))



