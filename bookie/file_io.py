"""Small blocking file helpers shared by the journal and the entry logger (worker threads)."""

from __future__ import annotations

import os
from collections.abc import Sequence



def _iov_max() -> int:
    try:
        return max(int(os.sysconf("SC_IOV_MAX")), 16)
    except (ValueError, OSError):
        return 1024


# The most buffers one pwritev call accepts (1024 on Linux).
_IOV_MAX = _iov_max()


def write_all_at(fd: int, bufs: Sequence[bytes | bytearray | memoryview], offset: int) -> int:
    """Write every buffer back to back at ``offset`` with as few syscalls as possible
    (pwritev, no joining copy); handles short writes. Returns the bytes written."""
    total = 0
    i = 0
    n = len(bufs)
    while i < n:
        chunk = bufs[i : i + _IOV_MAX]
        want = sum(len(b) for b in chunk)
        done = os.pwritev(fd, chunk, offset + total)
        if done < want:  # short write (rare on regular files): finish this chunk the slow way
            rest = memoryview(b"".join(chunk))[done:]
            while len(rest):
                k = os.pwrite(fd, rest, offset + total + done)
                done += k
                rest = rest[k:]
        total += want
        i += _IOV_MAX
    return total
