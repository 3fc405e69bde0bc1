"""Exceptions of the Pulsar wire codec: everything it raises derives from ``ProtocolError``."""

from __future__ import annotations


class ProtocolError(Exception):
    """Malformed bytes on the wire: the connection that produced them must be closed."""


class FrameTooLargeError(ProtocolError):
    """A frame announces a size above the decoder's ``max_frame_size``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class BatchFormatError(ProtocolError):
    """A batch payload does not split into the announced single messages."""


class CompressionError(ProtocolError):
    """A payload cannot be (de)compressed with the announced codec or size."""
