"""A data directory one quire process owns: created, checked writable, and locked.

``claim(path, flag)`` makes the directory, fails with a ``ConfigError`` a person can act on
when it cannot be written (permissions, a file in the way, a read-only file system), and takes
an exclusive ``flock`` on ``<dir>/quire.lock`` that the process holds until it exits (the
kernel drops it then, also after SIGKILL). A second process on the same directory fails at once
with the first one's pid instead of a RocksDB lock error.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from quire.config import ConfigError

LOCK_NAME = "quire.lock"
_held: dict[str, int] = {}  # path -> fd, kept open for the life of the process


def claim(path: str | Path, flag: str = "--data-dir") -> Path:
    root = Path(path).resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"data dir {root} is a file, not a directory: choose another with {flag}") from None
    except OSError as e:
        raise ConfigError(f"cannot create data dir {root}: {e.strerror}; choose another with {flag}") from None
    if not root.is_dir():
        raise ConfigError(f"data dir {root} is not a directory: choose another with {flag}")
    if str(root) in _held:
        return root
    lock = root / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"data dir {root} is not writable ({e.strerror}): fix its permissions or choose "
                          f"another with {flag}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise ConfigError(f"data dir {root} is in use by another quire process (pid {owner}): stop it, or "
                              f"choose another with {flag}") from None
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        os.close(fd)
        raise ConfigError(f"data dir {root} is not writable ({e.strerror}): fix its permissions or choose "
                          f"another with {flag}") from None
    _held[str(root)] = fd
    return root
