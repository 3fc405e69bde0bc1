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
error its usual answer. The payload part is checked by the same code as the general path's
(``frames.payload_frame``: checksum, metadata size). The frame's ``command`` is a shared
SEND placeholder (see ``LONE_SEND_COMMAND``): its fields are the ``LoneSend``'s.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from clients.protocol.errors import ProtocolError
from quire.varint import decode_varint

_TWO_U32 = struct.Struct(">II")
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


@dataclass(slots=True)
class LoneSend:
    """The CommandSend fields of a hand-decoded SEND (absent ones at their protobuf defaults)
    and the BaseCommand's bytes."""

    producer_id: int
    sequence_id: int
    num_messages: int
    highest_sequence_id: int
    raw_command: memoryview

    def command(self) -> pb.BaseCommand:
        """The SEND's real BaseCommand (parsed now: only an error's answer needs it)."""
        command = pb.BaseCommand()
        command.ParseFromString(self.raw_command)
        return command


def decode_lone_send(data: bytes | bytearray, max_frame_size: int) -> tuple[LoneSend, frames.Frame] | None:
    """``data`` as one SEND frame (with its leading total size), or None: not that shape."""
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
    view = memoryview(data)
    try:
        frame = frames.payload_frame(LONE_SEND_COMMAND, view[end:])
    except ProtocolError:  # a bad payload part: the general path answers it
        return None
    return LoneSend(pid, seq, num, highest, view[8:end]), frame
