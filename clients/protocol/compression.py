"""Payload compression codecs, compatible with the official Pulsar clients (sans-IO).

LZ4 is the raw *block* format (no frame, no size prefix) as the C++ client's
``LZ4_compress_default``; the receiver knows the size from ``uncompressed_size``. ZLIB is the
zlib-wrapped deflate stream; ZSTD a one-shot zstd frame; SNAPPY the raw snappy format (needs
the optional ``cramjam`` package).
"""

from __future__ import annotations

import importlib
import zlib
from types import ModuleType

import lz4.block
import zstandard

from .errors import CompressionError
from .pulsar_api_pb2 import LZ4, NONE, SNAPPY, ZLIB, ZSTD


def _optional_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on the environment
        return None


cramjam = _optional_module("cramjam")  # optional: snappy through cramjam's Rust bindings

Buffer = bytes | bytearray | memoryview

_zstd_c = zstandard.ZstdCompressor(level=3)
_zstd_d = zstandard.ZstdDecompressor()

CODEC_NAMES = {NONE: "NONE", LZ4: "LZ4", ZLIB: "ZLIB", ZSTD: "ZSTD", SNAPPY: "SNAPPY"}


def available(codec: int) -> bool:
    """Whether this process can (de)compress ``codec``."""
    return codec in (NONE, LZ4, ZLIB, ZSTD) or (codec == SNAPPY and cramjam is not None)


def compress(codec: int, data: Buffer) -> bytes:
    """Compress ``data`` with a ``CompressionType`` value."""
    if codec == NONE:
        return bytes(data)
    if codec == LZ4:
        return lz4.block.compress(data, store_size=False)
    if codec == ZLIB:
        return zlib.compress(data)
    if codec == ZSTD:
        return _zstd_c.compress(data)
    if codec == SNAPPY and cramjam is not None:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))
    raise CompressionError(f"compression codec {codec} is not available")


def decompress(codec: int, data: Buffer, uncompressed_size: int) -> bytes:
    """Decompress ``data``; the result must be exactly ``uncompressed_size`` bytes."""
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == LZ4:
            out = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
        elif codec == ZLIB:
            out = zlib.decompress(data)
        elif codec == ZSTD:
            out = _zstd_d.decompress(data, max_output_size=uncompressed_size)
        elif codec == SNAPPY and cramjam is not None:
            out = bytes(cramjam.snappy.decompress_raw(bytes(data)))
        else:
            raise CompressionError(f"compression codec {codec} is not available")
    except CompressionError:
        raise
    except Exception as exc:  # each library has its own error types
        raise CompressionError(f"cannot decompress {CODEC_NAMES.get(codec, codec)}: {exc}") from None
    if len(out) != uncompressed_size:
        raise CompressionError(f"decompressed {len(out)} bytes, metadata says {uncompressed_size}")
    return out
