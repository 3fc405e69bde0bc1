"""A producer attached to a topic: identity, access mode, in-order SEND_RECEIPTs, and the
check of what a SEND may carry.

Sends are persisted concurrently (pipelined) but the client needs receipts in the order it
sent them, so every SEND gets a ``PendingSend`` slot in a FIFO; a completed slot is answered
only once every slot before it has completed.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.errors import BrokerError, InvalidMessageError
from broker.rates import Rates
from clients.protocol import frames
from clients.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from broker.topic import PersistentTopic

ACCESS_MODES = {0: "Shared", 1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}


class ProducerPeer(Protocol):
    """What a producer needs from its client connection."""

    address: str

    def send_receipt(self, producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int) -> None: ...

    def send_send_error(self, producer_id: int, sequence_id: int, error: str, message: str) -> None: ...

    def send_close_producer(self, producer_id: int) -> None: ...


def check_message(frame: frames.Frame) -> None:
    """Raise ``InvalidMessageError`` unless a SEND carries a MessageMetadata that parses, has
    its required fields and a possible batch size. What is stored is read by every consumer,
    the dedup recovery and the TTL/seek scans, again after every restart: it must parse."""
    if frame.metadata_and_payload is None:
        raise InvalidMessageError("Invalid message: SEND without metadata and payload")
    try:
        md = frame.metadata()
    except ProtocolError as exc:
        raise InvalidMessageError(f"Invalid message metadata: {exc}") from None
    if md.HasField("num_messages_in_batch") and md.num_messages_in_batch < 1:
        raise InvalidMessageError(f"Invalid message metadata: num_messages_in_batch {md.num_messages_in_batch}")


@dataclass
class PendingSend:
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    size: int
    ledger_id: int = -1
    entry_id: int = -1
    error: BrokerError | None = None  # answered as SEND_ERROR(error.server_error, str(error))
    done: bool = False


@dataclass
class Producer:
    topic: "PersistentTopic"
    peer: ProducerPeer
    producer_id: int
    name: str
    access_mode: int = 0
    epoch: int = 0
    user_provided_name: bool = True
    metadata: dict[str, str] = field(default_factory=dict)
    schema_version: bytes | None = None
    connected_since: float = field(default_factory=time.time)
    closed: bool = False
    # Counters for stats
    msg_in: int = 0
    bytes_in: int = 0
    rates: Rates = field(default_factory=Rates)
    _pending: deque[PendingSend] = field(default_factory=deque)

    def update_rates(self) -> None:
        self.rates.update({"msgRateIn": self.msg_in, "msgThroughputIn": self.bytes_in})

    def new_pending(self, sequence_id: int, highest_sequence_id: int, num_messages: int, size: int) -> PendingSend:
        slot = PendingSend(sequence_id, highest_sequence_id, num_messages, size)
        self._pending.append(slot)
        return slot

    def complete(self, slot: PendingSend, ledger_id: int, entry_id: int, error: BrokerError | None = None) -> None:
        slot.ledger_id, slot.entry_id, slot.error, slot.done = ledger_id, entry_id, error, True
        q = self._pending
        if error is None and len(q) == 1 and q[0] is slot and not self.closed:  # the only one pending (one at a time)
            q.popleft()
            self.msg_in += slot.num_messages
            self.bytes_in += slot.size
            self.peer.send_receipt(self.producer_id, slot.sequence_id, slot.highest_sequence_id, ledger_id, entry_id)
            return
        self._flush()

    def _flush(self) -> None:
        q = self._pending
        while q and q[0].done:
            s = q.popleft()
            if self.closed:
                continue
            if s.error is None:
                self.msg_in += s.num_messages
                self.bytes_in += s.size
                self.peer.send_receipt(self.producer_id, s.sequence_id, s.highest_sequence_id, s.ledger_id, s.entry_id)
            else:
                self.peer.send_send_error(self.producer_id, s.sequence_id, s.error.server_error, str(s.error))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def stats(self) -> dict[str, Any]:
        return {
            "producerId": self.producer_id,
            "producerName": self.name,
            "accessMode": ACCESS_MODES.get(self.access_mode, "Shared"),
            "msgRateIn": self.rates.get("msgRateIn"),
            "msgThroughputIn": self.rates.get("msgThroughputIn"),
            "averageMsgSize": (self.bytes_in / self.msg_in) if self.msg_in else 0.0,
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "address": self.peer.address,
            "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
            "metadata": dict(self.metadata),
        }
