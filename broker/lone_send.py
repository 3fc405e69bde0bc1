"""A read that holds exactly one plain SEND frame, decoded by hand (the unbatched publish path).

A producer that sends one message at a time makes every read of its connection one whole
SEND frame. The general path (``FrameDecoder.feed``) keeps a buffer, slices views per frame and
builds a BaseCommand and reads the CommandSend's fields through protobuf wrappers: timed inside
the standalone that step took 10.5-11.2 µs of CPU per message, 7.7-7.9 with this one
(bench/results/publish_cpu17b.md).

:func:`decode_lone_send` accepts only the common shape: ``[total][cmdSize]`` covering the whole
read, a BaseCommand that is exactly ``type = SEND`` followed by ``send`` (in that order), a
CommandSend with nothing but ``producer_id``, ``sequence_id`` (both required), ``num_messages``
and ``highest_sequence_id``, every varint in its canonical range, and a payload after it.
Anything else (a transaction id, a chunk or marker flag, fields in another order, a second or
partial frame, an oversized frame) returns None and takes the general path, which gives every
error its usual answer. The entry after the command is checked here as the general path checks a
SEND's (``frames.payload_frame`` then ``broker.producer.check_message``), in one step and only
in its common shape: the 0x0e01 magic with a CRC32C that matches, a metadata size inside the
frame, a MessageMetadata that parses with its required fields and no batch count under 1.
Anything else (no checksum, a mismatch, broker entry metadata, bad metadata) returns None: the
general path answers it (ChecksumError, InvalidMessageError). ``LoneSend.entry`` is then the
bytes the broker stores, as ``Frame.stored_entry`` would give them, and the frame handed on is
the shared placeholder ``LONE_SEND_FRAME``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

import crc32c as _crc32c
from google.protobuf.message import DecodeError

from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from quire.varint import decode_varint

_TWO_U32 = struct.Struct(">II")
_MAGIC_CRC = b"\x0e\x01"  # frames.MAGIC_CRC32C, big-endian
_MessageMetadata = pb.MessageMetadata
# BaseCommand{type (field 1, varint) = SEND (6), send (field 6, length-delimited) = ...}
_SEND_PREFIX = b"\x08\x06\x32"
_I32_MAX = (1 << 31) - 1


class SendFields(Protocol):
    """What the broker reads of a SEND command (``pb.CommandSend`` has these too)."""

    @property
    def producer_id(self) -> int: ...

    @property
    def sequence_id(self) -> int: ...

    @property
    def num_messages(self) -> int: ...

    @property
    def highest_sequence_id(self) -> int: ...


# The ``command`` of every frame decode_lone_send returns: no BaseCommand is built per message
# (inside the standalone that cost ~3 µs of CPU, a cold upb parse and its wrappers). Its ``send``
# is empty: the fields are the LoneSend's, and ``LoneSend.command()`` parses the real one (for an
# error's answer). Never modified.
LONE_SEND_COMMAND = pb.BaseCommand(type=pb.BaseCommand.SEND)
# The frame of every lone SEND (its entry is the LoneSend's, already checked). Never modified.
LONE_SEND_FRAME = frames.Frame(LONE_SEND_COMMAND)


@dataclass(slots=True)
class LoneSend:
    """The CommandSend fields of a hand-decoded SEND (absent ones at their protobuf defaults),
    the BaseCommand's bytes and the checked entry as stored (from the 0x0e01 magic on)."""

    producer_id: int
    sequence_id: int
    num_messages: int
    highest_sequence_id: int
    raw_command: memoryview
    entry: bytes

    def command(self) -> pb.BaseCommand:
        """The SEND's real BaseCommand (parsed now: only an error's answer needs it)."""
        command = pb.BaseCommand()
        command.ParseFromString(self.raw_command)
        return command


def decode_lone_send(data: bytes | bytearray, max_frame_size: int) -> LoneSend | None:
    """``data`` as one SEND frame (with its leading total size) whose entry passes the broker's
    checks, or None: not that shape, or anything the general path must answer."""
    n = len(data)
    if n < 12:
        return None
    total, cmd_size = _TWO_U32.unpack_from(data, 0)
    if total + 4 != n or total > max_frame_size or cmd_size + 8 >= n or data[8:11] != _SEND_PREFIX:
        return None
    end = 12 + data[11]  # the CommandSend's length: one byte (under 128) or not this shape
    if data[11] >= 0x80 or end != 8 + cmd_size:
        return None
    pid = seq = -1
    num, highest = 1, 0
    pos = 12
    while pos < end:
        tag = data[pos]
        value = data[pos + 1] if pos + 1 < end else 0x80
        if value < 0x80:  # a one-byte varint: no call
            pos += 2
        else:
            value, pos = decode_varint(data, pos + 1, end)
            if pos < 0:
                return None
        if tag == 0x08:
            pid = value
        elif tag == 0x10:
            seq = value
        elif tag == 0x18 and value <= _I32_MAX:  # int32: a negative count is not this shape
            num = value
        elif tag == 0x30:
            highest = value
        else:
            return None
    if pos != end or pid < 0 or seq < 0:
        return None
    # [0x0e01][crc32c u32][metaSize u32][metadata][payload]
    meta_at = end + 10
    if n < meta_at or data[end:end + 2] != _MAGIC_CRC:
        return None
    crc, meta_size = _TWO_U32.unpack_from(data, end + 2)
    if meta_size > n - meta_at:
        return None
    view = memoryview(data)
    if _crc32c.crc32c(view[end + 6:]) != crc:
        return None
    md = _MessageMetadata()
    try:
        md.ParseFromString(view[meta_at:meta_at + meta_size])
    except (DecodeError, ValueError, RuntimeError):
        return None
    # (upb does not enforce proto2 `required` while parsing: IsInitialized does)
    if not md.IsInitialized() or (md.HasField("num_messages_in_batch") and md.num_messages_in_batch < 1):
        return None
    return LoneSend(pid, seq, num, highest, view[8:end], bytes(view[end:]))
