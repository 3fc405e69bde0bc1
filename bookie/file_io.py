"""Small blocking file helpers shared by the journal and the entry logger (worker threads)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence



def _iov_max() -> int:
    try:
        return max(int(os.sysconf("SC_IOV_MAX")), 16)
    except (ValueError, OSError):
        return 1024


# The most buffers one pwritev call accepts (1024 on Linux).
_IOV_MAX = _iov_max()
# pwritev2 flag: the call returns once its data is durable (one syscall instead of two).
_RWF_DSYNC: int | None = getattr(os, "RWF_DSYNC", None)


def write_all_at(fd: int, bufs: Sequence[bytes | bytearray | memoryview], offset: int) -> int:
    """Write every buffer back to back at ``offset`` with as few syscalls as possible
    (pwritev, no joining copy); handles short writes. Returns the bytes written."""
    total = 0
    i = 0
    n = len(bufs)
    while i < n:
        chunk = bufs[i : i + _IOV_MAX]
        want = sum(map(len, chunk))
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


def write_all_at_durable(fd: int, bufs: Sequence[bytes | bytearray | memoryview], offset: int,
                         nbytes: int = -1) -> int:
    """Like :func:`write_all_at`, then durable as after an fdatasync.

    A group that fits in one pwritev is written with RWF_DSYNC: write and data sync in one
    syscall, so a worker thread gives up and re-takes the GIL once instead of twice. The
    flag syncs the written range only, so anything bigger is written, then fdatasynced.
    ``nbytes``: the bytes of ``bufs`` when the caller keeps that count (exactly it: a short
    write is told by it), else -1.
    """
    global _RWF_DSYNC
    if _RWF_DSYNC is not None and len(bufs) <= _IOV_MAX:
        want = sum(map(len, bufs)) if nbytes < 0 else nbytes
        try:
            done = os.pwritev(fd, bufs, offset, _RWF_DSYNC)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            _RWF_DSYNC = None  # not supported here: use write + fdatasync from now on
        else:
            if done == want:
                return done
            # short write: finish it the slow way (the fdatasync covers every byte)
            done += write_all_at(fd, [memoryview(b"".join(bufs))[done:]], offset + done)
            os.fdatasync(fd)
            return done
    written = write_all_at(fd, bufs, offset)
    os.fdatasync(fd)
    return written


def drop_cached(fd: int, dropped_to: int, end: int, step: int = 1) -> int:
    """Drop ``fd``'s pages from ``dropped_to`` up to ``end`` (rounded down to a page) from the
    page cache once that is at least ``step`` bytes; returns the new ``dropped_to``. Only for
    written-back (fsynced) pages: dropping them loses nothing, a later read goes to the disk.
    A hint: if the kernel refuses it, nothing was dropped and the caller goes on."""
    drop_to = end & ~0xFFF
    if drop_to - dropped_to < max(step, 1):
        return dropped_to
    try:
        os.posix_fadvise(fd, dropped_to, drop_to - dropped_to, os.POSIX_FADV_DONTNEED)
    except OSError:
        return dropped_to
    return drop_to
