"""msgpack helpers for metadata values: everything stored by quire is msgpack bytes."""

from __future__ import annotations

from typing import Any

import msgpack

from metadata.errors import MetadataError


class ValueDecodeError(MetadataError, ValueError):
    """Bytes that are not a valid msgpack value."""


def pack(obj: Any) -> bytes:
    """Serialise `obj` (dicts, lists, str, bytes, ints, floats, bools, None)."""
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Inverse of pack: str stays str, bytes stay bytes, arrays come back as lists."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as exc:
        raise ValueDecodeError(f"not a msgpack value ({len(data)} bytes): {exc}") from exc
