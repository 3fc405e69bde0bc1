"""Acknowledgement grouping (Pulsar's ``AckGroupingTracker``): acks leave in batches.

Individual acks (with a batch-index ack set while part of a batch is still unacked) and the
newest cumulative ack wait up to ``ack_group_time_ms`` and go out as one ACK command each
(cumulative first); 1,000 pending individual acks, or a group time of 0, flush at once. What
cannot be sent (no connection) stays pending until the next flush after a reconnect.
"""

from __future__ import annotations

from typing import Any, Callable

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .protocol import commands as cmds

Key = tuple[int, int]
MAX_PENDING_INDIVIDUAL = 1000


class AckGroupingTracker:
    __slots__ = ("_consumer_id", "_group_time_ms", "_connection", "_individual", "_cumulative", "_queued")

    def __init__(self, consumer_id: int, group_time_ms: int, connection: Callable[[], Any]) -> None:
        self._consumer_id = consumer_id
        self._group_time_ms = group_time_ms
        self._connection = connection  # -> the owner's live ClientConnection or None
        self._individual: dict[Key, Any] = {}  # (ledger, entry) -> MessageIdData
        self._cumulative: Key | None = None
        self._queued = trio.Event()

    def add(self, key: Key, ack_set: list[int] | None = None) -> None:
        """Acknowledge one entry (or, with ``ack_set``, the batch indexes whose bits are clear)."""
        self._individual[key] = cmds.message_id(key[0], key[1], ack_set=ack_set)
        self._queued.set()
        if len(self._individual) >= MAX_PENDING_INDIVIDUAL or self._group_time_ms <= 0:
            self.flush()

    def add_cumulative(self, target: Key) -> None:
        """Acknowledge everything up to and including ``target`` (keeps the newest)."""
        if target[1] >= 0 and (self._cumulative is None or target > self._cumulative):
            self._cumulative = target
            self._queued.set()
        if self._group_time_ms <= 0:
            self.flush()

    def forget(self) -> None:
        """Drop what is pending (a seek makes those acks meaningless)."""
        self._individual.clear()
        self._cumulative = None

    def flush(self) -> None:
        cnx = self._connection()
        if cnx is None or cnx.is_closed:
            return
        try:
            if self._cumulative is not None:
                ledger, entry = self._cumulative
                cnx.send(cmds.ack(self._consumer_id, [cmds.message_id(ledger, entry)], cumulative=True))
                self._cumulative = None
            if self._individual:
                ids = list(self._individual.values())
                self._individual.clear()
                cnx.send(cmds.ack(self._consumer_id, ids))
        except errors.NotConnected:
            pass

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def run(self) -> None:
        """Send grouped acks ``ack_group_time_ms`` after the first one queued; idle otherwise."""
        interval = max(0.01, self._group_time_ms / 1000)
        while True:
            await self._queued.wait()
            self._queued = trio.Event()
            await trio.sleep(interval)
            self.flush()
            if self._individual or self._cumulative is not None:
                self._queued.set()  # not connected: try again later
