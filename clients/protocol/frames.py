"""Pulsar frame layout (sans-IO): encode commands, decode a byte stream into frames.

Simple command:  ``[total u32][cmdSize u32][BaseCommand]`` with ``total = 4 + cmdSize``.
Payload command: ``[total u32][cmdSize u32][BaseCommand]`` followed by the *entry*
``[0x0e01 u16][crc32c u32][metaSize u32][MessageMetadata][payload]`` (the magic and CRC are
optional on the wire; the CRC covers everything after it). A broker may prefix the entry with
``[0x0e02 u16][size u32][BrokerEntryMetadata]``.

The broker stores the entry (from the 0x0e01 magic on) as received and dispatches it with
``message_frame`` without re-encoding it; ``parse_entry`` splits stored bytes into metadata and
payload without copying the payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

import crc32c as _crc32c
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage

from .errors import FrameTooLargeError, ProtocolError
from .pulsar_api_pb2 import BaseCommand, BrokerEntryMetadata, MessageMetadata

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
# Room for the command and metadata around a max-size payload (Pulsar's MESSAGE_SIZE_FRAME_PADDING).
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TWO_U32 = struct.Struct(">II")
_MAGIC_CRC = struct.Struct(">HI")
# Frame.stored_entry hands an entry of at least this size on as a view of its frame's buffer
# when that buffer holds little else (at most _VIEW_BUFFER_SLACK more bytes: the frame's size
# fields and command): a smaller one is copied (a view costs an object more than small bytes).
VIEW_ENTRY_FROM = 16 * 1024
_VIEW_BUFFER_SLACK = 4096

Buffer = bytes | bytearray | memoryview


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, resumed from ``value``."""
    return _crc32c.crc32c(data, value)


# ---------------------------------------------------------------------------------------------
# Encoding


def encode_command(command: BaseCommand) -> bytes:
    """A simple command frame ``[total][cmdSize][BaseCommand]``."""
    body = command.SerializeToString()
    return _TWO_U32.pack(4 + len(body), len(body)) + body


def encode_entry(metadata: MessageMetadata | bytes, payload: Buffer, *, checksum: bool = True) -> bytes:
    """The entry bytes ``[0x0e01][crc32c][metaSize][metadata][payload]`` (or without magic+CRC)."""
    meta = metadata if isinstance(metadata, bytes) else metadata.SerializeToString()
    head = _U32.pack(len(meta)) + meta
    if not checksum:
        return head + bytes(payload)
    crc = crc32c(payload, crc32c(head))
    return b"".join((_MAGIC_CRC.pack(MAGIC_CRC32C, crc), head, payload))


def encode_payload_command(
    command: BaseCommand | bytes,
    metadata: MessageMetadata | bytes,
    payload: Buffer,
    *,
    checksum: bool = True,
) -> bytes:
    """A payload command frame (SEND or MESSAGE) with a freshly built entry: the same bytes as
    ``frame_with_entry(command, encode_entry(...))`` with one join, not two (a 128 KiB batch is
    copied once less)."""
    if not checksum:
        return frame_with_entry(command, encode_entry(metadata, payload, checksum=False))
    body = command if isinstance(command, bytes) else command.SerializeToString()
    meta = metadata if isinstance(metadata, bytes) else metadata.SerializeToString()
    head = _U32.pack(len(meta)) + meta
    crc = crc32c(payload, crc32c(head))
    entry_size = 6 + len(head) + len(payload)  # magic (2) + crc (4) + head + payload
    return b"".join((_TWO_U32.pack(4 + len(body) + entry_size, len(body)), body,
                     _MAGIC_CRC.pack(MAGIC_CRC32C, crc), head, payload))


def frame_with_entry(command: BaseCommand | bytes, entry: Buffer) -> bytes:
    """``[total][cmdSize][command]`` followed by already-encoded entry bytes, untouched (a
    command given as ``bytes`` is already serialized)."""
    body = command if isinstance(command, bytes) else command.SerializeToString()
    return b"".join((_TWO_U32.pack(4 + len(body) + len(entry), len(body)), body, entry))


def message_frame(message: BaseCommand, stored_entry: Buffer) -> bytes:
    """A MESSAGE frame for dispatch: the CommandMessage plus the stored entry, not re-encoded."""
    if message.type != BaseCommand.MESSAGE:
        raise ProtocolError(f"message_frame needs a MESSAGE command, got type {message.type}")
    return frame_with_entry(message, stored_entry)


# ---------------------------------------------------------------------------------------------
# Decoding


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``metadata_and_payload`` is ``[metaSize][metadata][payload]`` (None for simple commands);
    ``checksum_ok`` is None when the sender added no CRC; ``entry`` is the bytes from the 0x0e01
    magic on (what the broker stores), or ``[metaSize]...`` when there was no checksum.
    ``FrameDecoder`` also sets ``buffer``, the bytes the frame lies in, and ``end``, where the
    frame ends in them: the payload (a suffix of the frame) is ``buffer[end - len(payload):end]``,
    which a consumer splits in place instead of copying it to ``bytes`` first.
    """

    command: BaseCommand
    metadata_and_payload: memoryview | None = None
    checksum_ok: bool | None = None
    entry: memoryview | None = None
    broker_entry_metadata: BrokerEntryMetadata | None = None
    buffer: bytes | None = None
    end: int = 0

    def metadata(self) -> MessageMetadata:
        """Parse the MessageMetadata of a payload frame."""
        if self.metadata_and_payload is None:
            raise ProtocolError("frame carries no payload")
        return _split_metadata(self.metadata_and_payload)[0]

    def payload(self) -> memoryview:
        """The payload after the metadata (a view, not a copy)."""
        if self.metadata_and_payload is None:
            raise ProtocolError("frame carries no payload")
        meta_size = _meta_size(self.metadata_and_payload)
        return self.metadata_and_payload[4 + meta_size :]

    def stored_entry(self) -> bytes | memoryview:
        """The entry as the broker stores it: always with magic + CRC32C (added if absent).

        A copy, except for a large entry whose frame has its ``bytes`` buffer to itself (a frame
        that arrived in pieces, joined by the decoder): that entry is a read-only view of
        immutable bytes which pins nothing but its own frame, so the broker stores it as is
        (one 128 KiB copy fewer per batched SEND)."""
        if self.metadata_and_payload is None or self.entry is None:
            raise ProtocolError("frame carries no payload")
        if self.checksum_ok is not None:
            entry, buffer = self.entry, self.buffer
            if (len(entry) >= VIEW_ENTRY_FROM and type(buffer) is bytes
                    and len(buffer) - len(entry) <= _VIEW_BUFFER_SLACK):
                return entry
            return bytes(self.entry)
        crc = crc32c(self.metadata_and_payload)
        return _MAGIC_CRC.pack(MAGIC_CRC32C, crc) + bytes(self.metadata_and_payload)


_M = TypeVar("_M", bound=ProtoMessage)


def _parse(message_type: type[_M], data: Buffer, what: str) -> _M:
    msg = message_type()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ProtocolError(f"cannot parse {what}: {exc}") from None
    # upb does not enforce proto2 `required` while parsing; the C++ client would reject it.
    if not msg.IsInitialized():
        raise ProtocolError(f"{what} is missing required fields: {msg.FindInitializationErrors()}")
    return msg


def _meta_size(section: memoryview) -> int:
    if len(section) < 4:
        raise ProtocolError("payload section shorter than its metadata size field")
    (meta_size,) = _U32.unpack_from(section, 0)
    if meta_size > len(section) - 4:
        raise ProtocolError(f"metadata size {meta_size} exceeds the {len(section) - 4} bytes left")
    return meta_size


def _split_metadata(section: memoryview) -> tuple[MessageMetadata, memoryview]:
    meta_size = _meta_size(section)
    metadata = _parse(MessageMetadata, section[4 : 4 + meta_size], "MessageMetadata")
    return metadata, section[4 + meta_size :]


def _open_entry(
    entry: memoryview,
) -> tuple[memoryview, int | None, memoryview, BrokerEntryMetadata | None]:
    """Split ``entry`` into (from-magic view, stored crc or None, [metaSize]... view, broker meta)."""
    broker_meta = None
    if len(entry) >= 6 and _U16.unpack_from(entry, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (size,) = _U32.unpack_from(entry, 2)
        if size > len(entry) - 6:
            raise ProtocolError("broker entry metadata runs past the frame")
        broker_meta = _parse(BrokerEntryMetadata, entry[6 : 6 + size], "BrokerEntryMetadata")
        entry = entry[6 + size :]
    if len(entry) >= 2 and _U16.unpack_from(entry, 0)[0] == MAGIC_CRC32C:
        if len(entry) < 6:
            raise ProtocolError("truncated checksum after the 0x0e01 magic")
        (crc,) = _U32.unpack_from(entry, 2)
        return entry, crc, entry[6:], broker_meta
    return entry, None, entry, broker_meta


def decode_frame(frame: Buffer) -> Frame:
    """Decode one frame given without its leading total-size field."""
    view = memoryview(frame)
    if len(view) < 4:
        raise ProtocolError(f"frame of {len(view)} bytes has no command size")
    (cmd_size,) = _U32.unpack_from(view, 0)
    if cmd_size > len(view) - 4:
        raise ProtocolError(f"command size {cmd_size} exceeds the frame ({len(view) - 4} bytes left)")
    command = _parse(BaseCommand, view[4 : 4 + cmd_size], "BaseCommand")
    rest = view[4 + cmd_size :]
    if not rest:
        return Frame(command)
    return payload_frame(command, rest)


def payload_frame(command: BaseCommand, rest: memoryview) -> Frame:
    """The frame of ``command`` and ``rest``, the (non-empty) bytes after the command:
    ``[magic + crc][metaSize][metadata][payload]``, checked as :func:`decode_frame` checks them."""
    entry, crc, section, broker_meta = _open_entry(rest)
    _meta_size(section)  # validates the metadata size field now, not at first use
    checksum_ok = None if crc is None else crc32c(section) == crc
    return Frame(command, section, checksum_ok, entry, broker_meta)


class FrameDecoder:
    """Incremental decoder: ``feed(bytes) -> list[Frame]``.

    After it raised a ``ProtocolError`` the stream is out of sync: close the connection.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        # An incomplete frame's bytes, as received: joined once when the frame is complete
        # (growing a bytearray instead re-copies a large frame on every reallocation, and a
        # whole batch arrives in many pieces).
        self._parts: list[bytes | memoryview] = []
        self._have = 0
        self._need = 4  # bytes the parts must hold before the next frame can be complete

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return self._have

    def feed(self, data: Buffer) -> list[Frame]:
        """Add received bytes; return every frame they complete, in order.

        Complete frames are decoded in place (their views point into an immutable copy of the
        received bytes); only the tail of an incomplete frame is kept, and its pieces are
        joined once, when that frame is complete, with only the bytes it lacks from the new
        data (the rest of which is decoded in place), so large frames cost linear time.
        """
        if not isinstance(data, bytes):
            data = bytes(data)
        frames: list[Frame] = []
        start = 0
        if self._parts:
            have = self._have + len(data)
            if have < self._need:
                self._parts.append(data)
                self._have = have
                return frames
            if self._need > 4:  # a frame of known size: complete it, copy nothing else
                start = self._need - self._have
                self._parts.append(memoryview(data)[:start])
                whole = b"".join(self._parts)
                self._parts, self._have, self._need = [], 0, 4
                self._decode(whole, 0, frames)
            else:  # not even its size yet (a few bytes): join all
                self._parts.append(data)
                data = b"".join(self._parts)
                self._parts, self._have = [], 0
        self._decode(data, start, frames)
        return frames

    def _decode(self, data: bytes, pos: int, frames: list[Frame]) -> None:
        """Decode the complete frames of ``data`` from ``pos`` on; keep the incomplete rest."""
        view = memoryview(data)
        end = len(view)
        need = 4
        try:
            while end - pos >= 4:
                (total,) = _U32.unpack_from(view, pos)
                if total > self.max_frame_size:
                    raise FrameTooLargeError(total, self.max_frame_size)
                if end - pos - 4 < total:
                    need = 4 + total
                    break
                frame_end = pos + 4 + total
                frame = decode_frame(view[pos + 4 : frame_end])
                frame.buffer, frame.end = data, frame_end
                frames.append(frame)
                pos = frame_end
        finally:
            if pos < end:  # a view, not a copy: the join that completes the frame copies it
                self._parts.append(data if pos == 0 else view[pos:])
                self._have = end - pos
                self._need = need


# ---------------------------------------------------------------------------------------------
# Stored entries


@dataclass(slots=True)
class ParsedEntry:
    """A stored entry split into its metadata and a payload view (``checksum_ok`` None = unchecked)."""

    metadata: MessageMetadata
    payload: memoryview
    checksum_ok: bool | None
    broker_entry_metadata: BrokerEntryMetadata | None = None

    @property
    def is_batch(self) -> bool:
        """True iff the producer sent a batch (presence of num_messages_in_batch, as the C++ client)."""
        return self.metadata.HasField("num_messages_in_batch")

    @property
    def num_messages(self) -> int:
        """Messages in the entry: what it costs in consumer flow permits."""
        return self.metadata.num_messages_in_batch


def parse_entry(entry: Buffer, *, verify_checksum: bool = False) -> ParsedEntry:
    """Split stored bytes (``[0x0e02...][0x0e01][crc][metaSize][meta][payload]``) cheaply.

    Only the metadata is parsed (by protobuf's C parser, faster than any partial scan in Python);
    the payload stays a view and the CRC is checked only when asked.
    """
    _, crc, section, broker_meta = _open_entry(memoryview(entry))
    metadata, payload = _split_metadata(section)
    checksum_ok = None
    if verify_checksum and crc is not None:
        checksum_ok = crc32c(section) == crc
    return ParsedEntry(metadata, payload, checksum_ok, broker_meta)


def verify_entry_checksum(entry: Buffer) -> bool | None:
    """True/False if the entry carries a CRC32C and it matches/does not; None if it has none."""
    _, crc, section, _ = _open_entry(memoryview(entry))
    return None if crc is None else crc32c(section) == crc
