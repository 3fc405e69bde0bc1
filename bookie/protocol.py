"""The broker/client <-> bookie wire protocol: a pure codec (bytes in, objects out).

Frame layout (all integers big-endian)::

    [u32 total_len][u32 header_len][msgpack header][body]

``total_len`` counts every byte after itself (``4 + header_len + len(body)``) and is bounded by
the decoder's ``max_frame_size``. The header is a msgpack *array* (positional, cheaper than a
map on the hot path):

* request:  ``[op, request_id, ledger_id, entry_id, flags, master_key, previous_lac,
  timeout_ms, last_entry_id, max_entries, max_bytes]``; body = the entry bytes (ADD) or the
  LAC body (WRITE_LAC), empty otherwise.
* response: ``[op, request_id, status, ledger_id, entry_id, lac, last_entry_id, free_disk,
  total_disk, entry_lengths]``; body = ``body`` followed by every entry of ``entries``
  (``entry_lengths`` gives their sizes, so ``body`` is what precedes them).

Semantics the server implements (summarised here because the client codes against them):
READ of entry -1 reads the LAC; READ with FENCE (entry -1) fences the ledger durably and
returns the last entry the bookie holds in ``body`` (NO_ENTRY if none) with ``lac``; a READ
with ``previous_lac >= 0`` and ``timeout_ms > 0`` is a long poll answered once LAC >
previous_lac or at the timeout, with PIGGYBACK also carrying entry previous_lac+1 in ``body``;
RANGE_READ returns ``entries`` for ``[entry_id, last_entry_id]`` bounded by ``max_entries``
and ``max_bytes``.

No sockets and no trio here: the server, the ledger client, the tests and the fuzzers all
share this module (see h11 for the model).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

import msgpack

from bookie.errors import FrameTooLargeError, ProtocolError
from quire.buffer_pool import BufferPool

__all__ = [
    "Op",
    "Status",
    "Flag",
    "Request",
    "Response",
    "encode_request",
    "encode_add_request",
    "encode_add_reply",
    "encode_response",
    "encode_frame",
    "FrameDecoder",
    "decode_request",
    "decode_response",
    "ProtocolError",
    "FrameTooLargeError",
    "MAX_FRAME_SIZE",
]

# The largest entry is 5 MiB (Pulsar's maxMessageSize); 64 KiB leaves room for the header.
MAX_FRAME_SIZE = 5 * 1024 * 1024 + 64 * 1024

_U32 = struct.Struct(">I")
_U32_PAIR = struct.Struct(">II")
_U32_MAX = 0xFFFFFFFF


class Op(enum.IntEnum):
    ADD = 1
    READ = 2
    READ_LAC = 3
    WRITE_LAC = 4
    RANGE_READ = 5
    BOOKIE_INFO = 6
    AUTH = 7  # body = the client's token; first request on a connection when the bookie requires one


class Status(enum.IntEnum):
    OK = 0
    NO_LEDGER = 402
    NO_ENTRY = 403
    BAD_REQUEST = 404
    IO = 501
    UNAUTHORIZED = 502
    BAD_VERSION = 503
    FENCED = 504
    READ_ONLY = 505
    TOO_MANY_REQUESTS = 506


class Flag(enum.IntFlag):
    RECOVERY_ADD = 1
    FENCE = 2
    PIGGYBACK = 4
    HIGH_PRIORITY = 8


# int -> enum member lookups; dict access is much cheaper than Enum.__call__ on the hot path.
_OPS = {int(o): o for o in Op}
_STATUSES = {int(s): s for s in Status}
_ALL_FLAGS = int(Flag.RECOVERY_ADD | Flag.FENCE | Flag.PIGGYBACK | Flag.HIGH_PRIORITY)


@dataclass(slots=True)
class Request:
    op: Op
    request_id: int
    ledger_id: int = 0
    entry_id: int = 0
    flags: int = 0
    master_key: bytes = b""
    body: bytes = b""
    previous_lac: int = -1
    timeout_ms: int = 0
    last_entry_id: int = -1
    max_entries: int = 0
    max_bytes: int = 0


@dataclass(slots=True)
class Response:
    op: Op
    request_id: int
    status: Status
    ledger_id: int = 0
    entry_id: int = 0
    body: bytes = b""
    entries: list[bytes] = field(default_factory=list)
    lac: int = -1
    last_entry_id: int = -1
    free_disk: int = 0
    total_disk: int = 0
    # Never on the wire: set by an in-process bookie whose ``entries`` passed its own
    # checksum check on read and were handed over in memory (the client checks ids only).
    verified: bool = False


_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_unpackb = msgpack.unpackb  # defaults: arrays as lists, str as str, strict map keys

# Requests are encoded with fixed-width msgpack ints (msgpack decoders accept non-minimal
# encodings, so this is plain msgpack to any peer) so that decode_request can read them with
# two struct calls instead of msgpack + per-field type checks: the add hot path. Layout of the
# header: array(11), op fixint, u64 request_id, u64 ledger_id, i64 entry_id, flags fixint,
# bin8 master_key (length, bytes), then _REQ_TAIL. Any other encoding takes the msgpack path.
_REQ_HEAD = struct.Struct(">BBBQBQBqBBB")
_REQ_TAIL = struct.Struct(">BqBIBqBIBQ")  # i64 previous_lac, u32 timeout_ms, i64 last_entry_id, u32 max_entries, u64 max_bytes
_REQ_FIXED_SIZE = _REQ_HEAD.size + _REQ_TAIL.size  # header bytes besides the master key
_ARRAY11, _U64, _U32_TAG, _I64, _BIN8 = 0x9B, 0xCF, 0xCE, 0xD3, 0xC4


def encode_frame(header: list, body: bytes | bytearray | memoryview = b"") -> bytes:
    """One frame from an already-built header array and a body."""
    h = _packb(header)
    return b"".join((_U32_PAIR.pack(4 + len(h) + len(body), len(h)), h, body))


def encode_frame_head(header: list, body_size: int) -> bytes:
    """The frame's bytes before a body of ``body_size`` bytes (a writer sends the body's parts
    after it as they are)."""
    h = _packb(header)
    return _U32_PAIR.pack(4 + len(h) + body_size, len(h)) + h


def encode_frame_parts(header: list, parts: list[bytes] | list[bytes | memoryview]) -> bytes:
    """:func:`encode_frame` of a body given as parts (a range read's entries): one copy of each."""
    return b"".join((encode_frame_head(header, sum(map(len, parts))), *parts))


def encode_add_request(
    request_id: int, ledger_id: int, entry_id: int, flags: int, master_key: bytes, body: bytes | bytearray | memoryview
) -> bytes:
    """The whole frame for an ADD (the client's per-entry hot path: no Request object)."""
    return _encode_fixed(int(Op.ADD), request_id, ledger_id, entry_id, flags, master_key, -1, 0, -1, 0, 0, body)


def _encode_fixed(
    op: int, rid: int, lid: int, eid: int, flags: int, mk: bytes, plac: int, tmo: int, leid: int, mxe: int, mxb: int,
    body: bytes | bytearray | memoryview,
) -> bytes:
    klen = len(mk)
    if 0 <= op <= 0x7F and 0 <= flags <= 0x7F and klen <= 0xFF and type(mk) is bytes:
        try:
            head = _REQ_HEAD.pack(_ARRAY11, op, _U64, rid, _U64, lid, _I64, eid, flags, _BIN8, klen)
            tail = _REQ_TAIL.pack(_I64, plac, _U32_TAG, tmo, _I64, leid, _U32_TAG, mxe, _U64, mxb)
        except struct.error:
            pass  # a value out of the fixed widths (a bad request): plain msgpack below
        else:
            hlen = _REQ_FIXED_SIZE + klen
            return b"".join((_U32_PAIR.pack(4 + hlen + len(body), hlen), head, mk, tail, body))
    return encode_frame([op, rid, lid, eid, flags, mk, plac, tmo, leid, mxe, mxb], body)


# A whole ADD reply frame in one pack: total_len, header_len, then the header [op, request_id,
# status, ledger_id, entry_id, -1, -1, 0, 0, []] with fixed-width ints, so no msgpack call per
# entry: array(10), ADD fixint, u64 request_id, u16 status, u64 ledger_id, i64 entry_id, then
# fixints -1, -1, 0, 0 and an empty array.
_ADD_REPLY = struct.Struct(">IIBBBQBHBQBqBBBBB")
_ADD_REPLY_SIZE = _ADD_REPLY.size - 4
_ADD_REPLY_HLEN = _ADD_REPLY.size - 8
_ADD_REPLY_PACK = _ADD_REPLY.pack
_ARRAY10, _U16, _NEG1, _EMPTY_ARRAY = 0x9A, 0xCD, 0xFF, 0x90
_OP_ADD = int(Op.ADD)


def encode_add_reply(request_id: int, status: int, ledger_id: int, entry_id: int) -> bytes:
    """The whole reply frame for an ADD (the bookie's per-entry hot path: no Response object);
    decodes to ``Response(Op.ADD, request_id, status, ledger_id, entry_id)``."""
    return _ADD_REPLY_PACK(
        _ADD_REPLY_SIZE, _ADD_REPLY_HLEN, _ARRAY10, _OP_ADD, _U64, request_id, _U16, status,
        _U64, ledger_id, _I64, entry_id, _NEG1, _NEG1, 0, 0, _EMPTY_ARRAY,
    )


def encode_request(req: Request) -> bytes:
    """The whole frame for a request."""
    if type(req.master_key) is bytes:
        return _encode_fixed(
            int(req.op), req.request_id, req.ledger_id, req.entry_id, int(req.flags), req.master_key,
            req.previous_lac, req.timeout_ms, req.last_entry_id, req.max_entries, req.max_bytes, req.body,
        )
    return encode_frame(
        [
            int(req.op),
            req.request_id,
            req.ledger_id,
            req.entry_id,
            int(req.flags),
            req.master_key,
            req.previous_lac,
            req.timeout_ms,
            req.last_entry_id,
            req.max_entries,
            req.max_bytes,
        ],
        req.body,
    )


def encode_response(resp: Response) -> bytes:
    """The whole frame for a response."""
    entries = resp.entries
    parts: list[bytes] = [resp.body, *entries] if resp.body or not entries else entries
    return encode_frame_parts(
        [int(resp.op), resp.request_id, int(resp.status), resp.ledger_id, resp.entry_id, resp.lac,
         resp.last_entry_id, resp.free_disk, resp.total_disk, [len(e) for e in entries]],
        parts,
    )


# Large frames' buffers a FrameDecoder keeps for reuse: a range reader holds a few replies'
# entries as views (queued, being decoded) while the next replies arrive
LARGE_FRAME_POOL = 12
_LARGE_POOL = BufferPool(LARGE_FRAME_POOL)


class FrameDecoder:
    """Splits a byte stream into frames (each without its ``total_len`` prefix).

    Feed it whatever the socket returned; it keeps partial frames buffered and returns every
    complete frame at once, so a burst of pipelined requests is decoded in one call.
    """

    __slots__ = ("max_frame_size", "_buf", "large_from", "_large", "_filled")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE, large_from: int = 0) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        # Frames of at least ``large_from`` bytes (0: none) are received into a bytearray of
        # their own size (see pending_large); such a frame is returned as that bytearray.
        self.large_from = large_from
        self._large: bytearray | None = None
        self._filled = 0

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf) + (self._filled if self._large is not None else 0)

    def reset(self) -> None:
        """Drop the held-back bytes and give their memory back (the connection is closing)."""
        self._buf = bytearray()
        self._large = None

    def pending_large(self) -> memoryview | None:
        """The unfilled rest of a large frame being received, or None: a reader may receive
        straight into it (``recv_into``) and then call :meth:`large_received`, so a range
        read's reply is copied from the socket once, into the buffer its entries are views of."""
        large = self._large
        return None if large is None else memoryview(large)[self._filled:]

    def large_received(self, n: int) -> bytearray | None:
        """``n`` more bytes were received into :meth:`pending_large`: the frame once complete."""
        large = self._large
        assert large is not None
        self._filled += n
        if self._filled < len(large):
            return None
        self._large = None
        return large

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        frames: list[bytes] = []
        large = self._large
        if large is not None:  # fed while a large frame is received: its bytes first
            take = min(len(large) - self._filled, len(data))
            large[self._filled:self._filled + take] = memoryview(data)[:take]
            done = self.large_received(take)
            if done is None:
                return frames
            frames.append(done)  # type: ignore[arg-type]  # a bytes-like frame
            data = memoryview(data)[take:]
        buf = self._buf
        if buf:
            buf += data
            src: bytes | bytearray | memoryview = buf
        else:
            src = data  # nothing buffered: parse straight from the received bytes
        n = len(src)
        pos = 0
        unpack_from = _U32.unpack_from
        limit = self.max_frame_size
        direct = src if type(src) is bytes else None  # bytes are sliced directly
        view = memoryview(src)
        try:
            while n - pos >= 4:
                (size,) = unpack_from(src, pos)
                if size > limit or size < 4:
                    # The stream cannot be resynchronised: the caller must drop the connection.
                    if size > limit:
                        raise FrameTooLargeError(f"frame of {size} bytes (max {limit})")
                    raise ProtocolError(f"frame of {size} bytes is shorter than its header length field")
                end = pos + 4 + size
                if end > n:
                    if self.large_from and size >= self.large_from:
                        # the frame's own buffer, holding what arrived of it so far
                        self._large = _LARGE_POOL.get(size)
                        self._large[: n - pos - 4] = view[pos + 4 :]
                        self._filled = n - pos - 4
                        pos = n
                    break
                # one copy per frame (slicing bytes directly is cheaper than view + tobytes)
                frames.append(direct[pos + 4 : end] if direct is not None else view[pos + 4 : end].tobytes())
                pos = end
            rest = view[pos:].tobytes() if pos < n and src is not buf else b""
        finally:
            view.release()
        if src is buf:
            if pos:
                del buf[:pos]
        elif rest:
            buf += rest
        return frames

    def feed_requests(self, data: bytes | bytearray | memoryview) -> tuple[list[Request], ProtocolError | None]:
        """``feed(data)`` + :func:`decode_request` of each frame, with one copy per request
        (its body) instead of three: fixed-width headers are decoded straight from the received
        bytes. A malformed request ends the batch: the requests before it are returned with the
        error, so the caller can answer them before dropping the connection."""
        buf = self._buf
        if buf:
            # the held-back partial frame (at most one frame) + the new bytes: one copy of each
            src = bytes(buf) + data
            buf.clear()
        else:
            src = data if type(data) is bytes else bytes(data)
        reqs: list[Request] = []
        n = len(src)
        pos = 0
        unpack_from = _U32.unpack_from
        limit = self.max_frame_size
        err: ProtocolError | None = None
        try:
            while n - pos >= 4:
                (size,) = unpack_from(src, pos)
                if size > limit:
                    raise FrameTooLargeError(f"frame of {size} bytes (max {limit})")
                if size < 4:
                    raise ProtocolError(f"frame of {size} bytes is shorter than its header length field")
                stop = pos + 4 + size
                if stop > n:
                    break
                start = pos + 4
                end = start + 4 + unpack_from(src, start)[0]
                req = _decode_fixed(src, start, end, stop) if end <= stop else None
                reqs.append(req if req is not None else decode_request(src[start:stop]))
                pos = stop
        except ProtocolError as exc:
            if not reqs:
                raise
            err = exc  # the stream cannot be resynchronised; nothing after this frame is kept
        else:
            if pos < n:
                with memoryview(src) as rest:
                    buf += rest[pos:]
        return reqs, err


def _split(frame: bytes | bytearray | memoryview) -> tuple[list, memoryview]:
    """Header array and body view of one frame (as returned by FrameDecoder.feed)."""
    n = len(frame)
    if n < 4:
        raise ProtocolError("frame shorter than its header length field")
    (hlen,) = _U32.unpack_from(frame, 0)
    if hlen > n - 4:
        raise ProtocolError(f"header length {hlen} exceeds frame size {n}")
    view = memoryview(frame)
    try:
        header = msgpack.unpackb(view[4 : 4 + hlen], use_list=True, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises a zoo of types on garbage
        raise ProtocolError(f"undecodable header: {exc}") from None
    if type(header) is not list:
        raise ProtocolError("header is not an array")
    return header, view[4 + hlen :]


def _int(v: object, lo: int, hi: int, what: str) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise ProtocolError(f"bad {what}: {v!r}")
    return v


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_U64_MAX = (1 << 64) - 1


def _decode_fixed(src: bytes, pos: int, end: int, stop: int) -> Request | None:
    """The request in ``src[pos:stop]`` (a frame without its total_len prefix, header ending at
    ``end``) if its header has the fixed-width encoding (see _REQ_HEAD), else None. The struct
    types already bound every field as decode_request's msgpack path checks it; only the type
    tags, flags and op remain to check."""
    if end < pos + 4 + _REQ_FIXED_SIZE or src[pos + 4] != _ARRAY11:
        return None
    _, op, t1, rid, t2, lid, t3, eid, flags, t4, klen = _REQ_HEAD.unpack_from(src, pos + 4)
    k = pos + 4 + _REQ_HEAD.size + klen
    if (
        end == k + _REQ_TAIL.size and t1 == _U64 and t2 == _U64 and t3 == _I64 and t4 == _BIN8
        and flags <= _ALL_FLAGS and op in _OPS
    ):
        t5, plac, t6, tmo, t7, leid, t8, mxe, t9, mxb = _REQ_TAIL.unpack_from(src, k)
        if t5 == _I64 and t6 == _U32_TAG and t7 == _I64 and t8 == _U32_TAG and t9 == _U64:
            return Request(_OPS[op], rid, lid, eid, flags, src[k - klen : k], src[end:stop], plac, tmo, leid, mxe, mxb)
    return None


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """A Request from one frame; ProtocolError on anything malformed."""
    if type(frame) is not bytes:
        frame = bytes(frame)
    # Hot path (every add): bytes slicing and positional unpacking, no memoryviews.
    n = len(frame)
    if n < 4:
        raise ProtocolError("frame shorter than its header length field")
    end = 4 + _U32.unpack_from(frame, 0)[0]
    if end > n:
        raise ProtocolError(f"header length {end - 4} exceeds frame size {n}")
    req = _decode_fixed(frame, 0, end, n)
    if req is not None:
        return req
    try:
        h = _unpackb(frame[4:end])
    except Exception as exc:  # msgpack raises a zoo of types on garbage
        raise ProtocolError(f"undecodable header: {exc}") from None
    if type(h) is not list:
        raise ProtocolError("header is not an array")
    if len(h) != 11:
        raise ProtocolError(f"request header has {len(h)} fields, expected 11")
    op = _OPS.get(h[0]) if type(h[0]) is int else None
    if op is None:
        raise ProtocolError(f"unknown op {h[0]!r}")
    _, rid, lid, eid, flags, mk, plac, tmo, leid, mxe, mxb = h
    # One chained check for the common case; the slow path names the bad field. msgpack ints
    # are already within [I64_MIN, U64_MAX], so only the tighter bounds are tested here.
    if (
        type(rid) is int and type(lid) is int and type(eid) is int and type(flags) is int and type(mk) is bytes
        and type(plac) is int and type(tmo) is int and type(leid) is int and type(mxe) is int and type(mxb) is int
        and rid >= 0 and lid >= 0 and eid <= _I64_MAX and 0 <= flags <= _ALL_FLAGS and plac <= _I64_MAX
        and 0 <= tmo <= _U32_MAX and leid <= _I64_MAX and 0 <= mxe <= _U32_MAX and mxb >= 0
    ):
        return Request(op, rid, lid, eid, flags, mk, frame[end:], plac, tmo, leid, mxe, mxb)
    if type(mk) is not bytes:
        raise ProtocolError("master_key is not bytes")
    return Request(
        op,
        _int(h[1], 0, _U64_MAX, "request_id"),
        _int(h[2], 0, _U64_MAX, "ledger_id"),
        _int(h[3], _I64_MIN, _I64_MAX, "entry_id"),
        _int(h[4], 0, _ALL_FLAGS, "flags"),
        mk,
        frame[end:],
        _int(h[6], _I64_MIN, _I64_MAX, "previous_lac"),
        _int(h[7], 0, _U32_MAX, "timeout_ms"),
        _int(h[8], _I64_MIN, _I64_MAX, "last_entry_id"),
        _int(h[9], 0, _U32_MAX, "max_entries"),
        _int(h[10], 0, _U64_MAX, "max_bytes"),
    )


# The reply frame of encode_add_reply after its length field, and its constant bytes: a frame
# of that size with those constants is read with one struct call (the broker's per-add hot path).
_ADD_REPLY_FRAME = struct.Struct(_ADD_REPLY.format[0] + _ADD_REPLY.format[2:])
_ADD_REPLY_MARKS = (_ADD_REPLY_HLEN, _ARRAY10, _OP_ADD, _U64, _U16, _U64, _I64, _NEG1, _NEG1, 0, 0, _EMPTY_ARRAY)
_OP_ADD_ENUM = Op.ADD


def decode_add_ack(frame: bytes | bytearray | memoryview) -> tuple[int, int, int, int] | None:
    """``(request_id, status, ledger_id, entry_id)`` of an ADD reply in
    :func:`encode_add_reply`'s layout with a known status, else None (any other frame:
    :func:`decode_response` decodes it). One struct call: the ledger client's per-reply hot
    path, where an add's callback needs only the status (no Response is built)."""
    if len(frame) != _ADD_REPLY_SIZE:
        return None
    hlen, a10, op, t1, rid, t2, status, t3, lid, t4, eid, n1, n2, z1, z2, empty = _ADD_REPLY_FRAME.unpack_from(frame)
    if (hlen, a10, op, t1, t2, t3, t4, n1, n2, z1, z2, empty) == _ADD_REPLY_MARKS and status in _STATUSES:
        return rid, status, lid, eid
    return None


def decode_response(frame: bytes | bytearray | memoryview) -> Response:
    """A Response from one frame; ProtocolError on anything malformed."""
    ack = decode_add_ack(frame)
    if ack is not None:
        rid, status, lid, eid = ack
        return Response(_OP_ADD_ENUM, rid, _STATUSES[status], lid, eid)
    return _decode_response_msgpack(frame)


def _decode_response_msgpack(frame: bytes | bytearray | memoryview) -> Response:
    """decode_response for any frame (msgpack header and per-field checks)."""
    h, body = _split(frame)
    if len(h) != 10:
        raise ProtocolError(f"response header has {len(h)} fields, expected 10")
    op = _OPS.get(h[0]) if type(h[0]) is int else None
    if op is None:
        raise ProtocolError(f"unknown op {h[0]!r}")
    status = _STATUSES.get(h[2]) if type(h[2]) is int else None
    if status is None:
        raise ProtocolError(f"unknown status {h[2]!r}")
    lengths = h[9]
    if type(lengths) is not list:
        raise ProtocolError("entry_lengths is not an array")
    entries: list[bytes] = []
    if lengths:
        total = 0
        for ln in lengths:
            total += _int(ln, 0, MAX_FRAME_SIZE, "entry length")
        if total > len(body):
            raise ProtocolError("entry lengths exceed the frame body")
        pos = len(body) - total
        head = bytes(body[:pos])
        if type(frame) is bytearray:
            # a large frame in a buffer of its own (FrameDecoder.large_from): the entries are
            # views of it, not copies (a reader copies what it keeps, as for a local bookie's)
            for ln in lengths:
                entries.append(body[pos : pos + ln])  # type: ignore[arg-type]  # a bytes-like view
                pos += ln
        else:
            for ln in lengths:
                entries.append(bytes(body[pos : pos + ln]))
                pos += ln
    else:
        head = bytes(body)
    _, rid, _, lid, eid, lac, leid, fdisk, tdisk, _ = h
    # Hot path (every add ack): one chained check for the common case, as in decode_request.
    if (
        type(rid) is int and type(lid) is int and type(eid) is int and type(lac) is int and type(leid) is int
        and type(fdisk) is int and type(tdisk) is int
        and 0 <= rid <= _U64_MAX and 0 <= lid <= _U64_MAX and _I64_MIN <= eid <= _I64_MAX
        and _I64_MIN <= lac <= _I64_MAX and _I64_MIN <= leid <= _I64_MAX
        and 0 <= fdisk <= _U64_MAX and 0 <= tdisk <= _U64_MAX
    ):
        return Response(op, rid, status, lid, eid, head, entries, lac, leid, fdisk, tdisk)
    return Response(
        op,
        _int(h[1], 0, _U64_MAX, "request_id"),
        status,
        _int(h[3], 0, _U64_MAX, "ledger_id"),
        _int(h[4], _I64_MIN, _I64_MAX, "entry_id"),
        head,
        entries,
        _int(h[5], _I64_MIN, _I64_MAX, "lac"),
        _int(h[6], _I64_MIN, _I64_MAX, "last_entry_id"),
        _int(h[7], 0, _U64_MAX, "free_disk"),
        _int(h[8], 0, _U64_MAX, "total_disk"),
    )
