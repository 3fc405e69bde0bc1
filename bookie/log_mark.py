"""The LastLogMark: the journal position up to which everything is in entry logs + index.

Persisted as ``lastMark`` in every ledger dir's ``current/``: ``u64 file_id | u64 offset |
u32 crc32c``, replaced atomically (write temp, fsync, rename, fsync dir). At startup the
maximum over all ledger dirs wins; a file with a bad checksum is ignored (the other dirs or an
older replay start then cover it). The mark never moves backwards.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

FILE_NAME = "lastMark"
_MARK = struct.Struct(">QQ")


@dataclass(frozen=True, order=True, slots=True)
class LogMark:
    file_id: int = 0
    offset: int = 0

    def __str__(self) -> str:
        return f"({self.file_id:x}.txn, {self.offset})"


def encode(mark: LogMark) -> bytes:
    body = _MARK.pack(mark.file_id, mark.offset)
    return body + crc32c(body).to_bytes(4, "big")


def decode(data: bytes) -> LogMark | None:
    if len(data) != _MARK.size + 4:
        return None
    body = data[: _MARK.size]
    if crc32c(body).to_bytes(4, "big") != data[_MARK.size :]:
        return None
    return LogMark(*_MARK.unpack(body))


def read_mark(current_dirs: list[Path]) -> LogMark:
    """The highest valid mark over the given ``current/`` dirs (LogMark(0, 0) if none)."""
    best = LogMark()
    for d in current_dirs:
        try:
            mark = decode((d / FILE_NAME).read_bytes())
        except FileNotFoundError:
            continue
        if mark is not None and mark > best:
            best = mark
    return best


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_mark(current_dirs: list[Path], mark: LogMark) -> None:
    """Durably replace ``lastMark`` in every dir (blocking: run it in a thread)."""
    data = encode(mark)
    for d in current_dirs:
        tmp = d / (FILE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, d / FILE_NAME)
        fsync_dir(d)
