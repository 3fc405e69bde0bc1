"""Column-wise scan of a batch payload: every record's fields as numpy arrays, no per-record Python.

A batch payload is ``n`` times ``[u32 size][SingleMessageMetadata][payload]``. Where each record
starts depends on the one before, so instead of walking the chain record by record this scans
every *candidate* start at once (a big-endian size below 64 KiB — two zero bytes — followed by
the tag of a field protobuf writes first: properties, partition_key or payload_size), parses the
candidates' metadata fields with numpy, one field of every candidate per step, and then checks
that the candidates that parse form the chain ``0 -> next -> ...`` of ``n`` records. Zero bytes
inside payloads only add candidates that the chain check leaves out; anything the scan cannot
vouch for (a malformed batch, an unusual wire type, very many candidates) returns ``None`` and the
caller decodes record by record, with that path's precise errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_FIELDS = 64  # fields per record scanned before giving up (the message type has ten)
PAD = 16  # zero bytes after the payload: a varint read at the end stays in bounds
_FIRST_TAG = np.zeros(256, bool)  # what protobuf writes first: properties (1), partition_key (2),
_FIRST_TAG[[0x0A, 0x12, 0x18]] = True  # or payload_size (3; required)


@dataclass
class Records:
    """The ``n`` records of one batch, in order: offsets into the payload and decoded fields."""

    meta_start: np.ndarray  # int64: first byte of the record's SingleMessageMetadata
    value_start: np.ndarray  # int64: first payload byte
    value_size: np.ndarray  # int64
    key_start: np.ndarray  # int64 (meta_start when absent)
    key_size: np.ndarray  # int64, -1: no partition_key
    event_time: np.ndarray  # int64 ms, 0: none
    compacted: np.ndarray  # bool
    properties: dict[int, list[tuple[int, int]]]  # record index -> KeyValue (start, size) submessages


_VALUE_TAGS = frozenset((0x0A, 0x12, 0x18, 0x20, 0x28))  # the fields a row needs
_SKIPPED_VARINTS = frozenset(t for t in range(0x08, 0x100, 8)) - _VALUE_TAGS  # wire type 0, not needed


def _varint_sizes(padded: np.ndarray, at: np.ndarray) -> tuple[np.ndarray | int, np.ndarray | None]:
    """``(byte count, too_long)`` of the varint at each of ``at``: a field skipped, not read."""
    more = padded[at] >= 0x80
    if not more.any():
        return 1, None
    count = 1 + more
    for j in range(1, 10):
        more &= padded[at + j] >= 0x80
        if not more.any():
            return count, None
        count += more
    return count, more


def _varints(padded: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray | int, np.ndarray | None]:
    """``(value, byte count, too_long)`` of the varint at each of ``at`` (too_long: over nine
    bytes, or None when none is)."""
    b = padded[at]
    more = b >= 0x80
    if not more.any():  # the usual case: one byte
        return b.astype(np.int64), 1, None
    value = (b & 0x7F).astype(np.int64)
    count = np.ones(len(at), np.int64)
    for shift in range(7, 63, 7):
        b = padded[at + count]
        value |= np.where(more, (b & 0x7F).astype(np.int64) << shift, 0)
        count += more
        more &= b >= 0x80
        if not more.any():
            return value, count, None
    return value, count, more


def scan_batch(buf: bytes, n: int, size: int | None = None) -> Records | None:
    """The ``n`` records of the batch payload ``buf``, or None: decode it record by record.
    ``size``: the payload is ``buf[:size]``, followed by at least ``PAD`` zero bytes (saves a copy)."""
    total = len(buf) if size is None else size
    if n <= 0 or total < 5:
        return None
    a = np.frombuffer(buf, np.uint8, count=total)
    zeros = np.flatnonzero(a[:total - 4] == 0)  # few in most payloads: cheaper than pairing bytes
    cand = zeros[a[zeros + 1] == 0]
    cand = cand[_FIRST_TAG[a[cand + 4]]]
    k = len(cand)
    if k < n or k > 8 * n + 64:
        return None  # too few starts, or so many zero bytes that record by record is cheaper
    padded = np.frombuffer(buf, np.uint8) if size is not None else np.concatenate([a, np.zeros(PAD, np.uint8)])
    meta = cand + 4
    end = meta + ((a[cand + 2].astype(np.int64) << 8) | a[cand + 3])
    bad = end > total
    np.minimum(end, total, out=end)
    q = meta.copy()
    value_size = np.full(k, -1, np.int64)
    key_start = meta.copy()
    key_size = np.full(k, -1, np.int64)
    event = np.zeros(k, np.int64)
    compacted = np.zeros(k, bool)
    props: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    q[bad] = end[bad]
    for _ in range(MAX_FIELDS):
        alive = q < end
        if alive.all():  # the usual case: no record has run out of fields yet
            live: Any = slice(None)
            at, stop = q, end
        else:
            live = np.flatnonzero(alive)
            if not len(live):
                break
            at, stop = q[live], end[live]
        tag = padded[at]
        first = int(tag[0])
        if (tag == first).all():  # usually every record has the same field here
            wire = first & 7
            if first in _SKIPPED_VARINTS:
                val, (count, too_long) = None, _varint_sizes(padded, at + 1)
            else:
                val, count, too_long = _varints(padded, at + 1)
            body = at + 1 + count
            nxt = body + val if wire == 2 else body
            broken = nxt > stop if wire in (0, 2) else np.ones(len(at), bool)
            groups: list[tuple[int, Any]] = [(first, slice(None))]
        else:
            val, count, too_long = _varints(padded, at + 1)
            body = at + 1 + count
            wire_a = tag & 7
            nxt = body + np.where(wire_a == 2, val, 0)
            broken = (nxt > stop) | ((wire_a != 0) & (wire_a != 2))
            groups = [(t, tag == t) for t in np.flatnonzero(np.bincount(tag, minlength=256)).tolist()
                      if t in _VALUE_TAGS]
        if too_long is not None:
            broken |= too_long
        for t, hit in groups:
            if t not in _VALUE_TAGS:
                continue
            rows = live if isinstance(hit, slice) else \
                (hit if isinstance(live, slice) else live[hit])
            assert val is not None
            if t == 0x18:
                value_size[rows] = val[hit]
            elif t == 0x12:
                key_start[rows], key_size[rows] = body[hit], val[hit]
            elif t == 0x28:
                event[rows] = val[hit]
            elif t == 0x20:
                compacted[rows] = val[hit] != 0
            else:
                props.append((np.arange(k)[rows], body[hit], val[hit]))
        if broken.any():
            bad[live if not isinstance(live, slice) else slice(None)] |= broken
            nxt = np.where(broken, stop, nxt)
        if isinstance(live, slice):
            q = nxt
        else:
            q[live] = nxt
    else:
        bad |= q < end
    bad |= value_size < 0
    nxt_start = end + value_size
    bad |= nxt_start > total
    good = np.flatnonzero(~bad)
    starts, follow = cand[good], nxt_start[good]
    chain: Any
    if len(good) >= n and starts[0] == 0 and (follow[:n - 1] == starts[1:n]).all():
        chain = slice(None) if k == n else good[:n]  # no candidate inside a payload
    else:  # candidates inside payloads: follow the chain through the ones that parse
        index = dict(zip(starts.tolist(), range(len(good))))
        follow_list = follow.tolist()
        picked, pos = [], 0
        for _ in range(n):
            j = index.get(pos)
            if j is None:
                return None
            picked.append(j)
            pos = follow_list[j]
        chain = good[picked]
    properties: dict[int, list[tuple[int, int]]] = {}
    if props:
        where = np.full(k, -1, np.int64)
        where[chain] = np.arange(n)  # candidate -> record index
        for rows, starts_, sizes in props:
            for r, s, z in zip(where[rows].tolist(), starts_.tolist(), sizes.tolist()):
                if r >= 0:
                    properties.setdefault(r, []).append((s, z))
    return Records(meta[chain], end[chain], value_size[chain], key_start[chain], key_size[chain], event[chain],
                   compacted[chain], properties)
