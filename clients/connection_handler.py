"""The reconnect loop producers and consumers share (Pulsar's ``ConnectionHandler``).

A producer or consumer (the *owner*) keeps its live connection in ``owner._cnx`` (read on every
send, so it stays a plain attribute); this handler owns what happens around it: the event that
says the connection was lost, the capped exponential back-off, and the decision after a failed
attempt (retry on a retryable error, stop for good on a fatal one). ``establish()`` is the
owner's lookup + PRODUCER/SUBSCRIBE; it calls :meth:`ConnectionHandler.connected` once the
broker accepted it.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .lookup import Backoff

log = logging.getLogger(__name__)


class Reconnectable(Protocol):
    """What the handler needs of its owner."""

    @property
    def closed(self) -> bool:
        """True once the owner was closed by the application (stop reconnecting)."""

    def describe(self) -> str:
        """For log lines: e.g. ``producer p-1 on persistent://public/default/t``."""

    async def establish(self) -> None:
        """Look the topic up, get a pooled connection, register; raise a PulsarException on failure."""

    def fail(self, error: errors.PulsarException) -> None:
        """A fatal error ended the owner (topic deleted, terminated, fenced ...)."""


class ConnectionHandler:
    """Reconnects its owner after every lost connection until the owner closes or fails."""

    def __init__(self, owner: Reconnectable, backoff: Backoff | None = None) -> None:
        self._owner = owner
        self._backoff = backoff or Backoff()
        self._lost = trio.Event()

    def connected(self) -> None:
        """The owner's new connection is registered: the next loss starts a new attempt."""
        self._lost = trio.Event()

    def connection_lost(self) -> None:
        self._lost.set()

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def run(self) -> None:
        """Owned by the owner's nursery: returns once the owner is closed or failed fatally."""
        owner = self._owner
        while True:
            await self._lost.wait()
            # Attempts until one succeeds: a failed one retries whatever ``_lost`` says (an
            # attempt that failed after ``connected()`` reset it must not end the retries).
            while True:
                if owner.closed:
                    return
                await trio.sleep(self._backoff.next())
                if owner.closed:
                    return
                try:
                    await owner.establish()
                except errors.FATAL as exc:
                    owner.fail(exc)
                    return
                except errors.PulsarException as exc:
                    log.info("%s: reconnect failed: %s", owner.describe(), exc)
                    continue
                break
            self._backoff.reset()
            log.info("%s reconnected", owner.describe())
