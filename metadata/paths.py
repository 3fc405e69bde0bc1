"""Node path rules shared by every backend: validation, parent/name split, value checks.

Paths follow ZooKeeper: absolute, '/'-separated, no trailing '/', no empty, '.' or '..'
components and no NUL or control characters. A sequential create may name its parent with a
trailing '/' (the server appends the 10-digit suffix), so callers validate ``path + "0"``.
"""

from __future__ import annotations

import re

from metadata.errors import InvalidPathError, ValueTooLargeError
from metadata.store import MAX_VALUE_SIZE

ROOT = "/"

# Code points ZooKeeper's PathUtils rejects: NUL, C0/C1 controls, surrogates, private use, specials.
_BAD_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


def validate_path(path: object) -> str:
    """Return `path` if it is a valid node path, else raise InvalidPathError."""
    if not isinstance(path, str):
        raise InvalidPathError(f"path must be a str, got {type(path).__name__}")
    if not path.startswith("/"):
        raise InvalidPathError(f"path must be absolute: {path!r}")
    if path == ROOT:
        return path
    if path.endswith("/"):
        raise InvalidPathError(f"path must not end with '/': {path!r}")
    for part in path[1:].split("/"):
        if part in ("", ".", ".."):
            raise InvalidPathError(f"empty, '.' or '..' component in {path!r}")
    bad = _BAD_CHARS.search(path)
    if bad is not None:
        raise InvalidPathError(f"invalid character {bad.group()!r} in path {path!r}")
    return path


def validate_create_path(path: object, sequential: bool) -> str:
    """Like validate_path, but a sequential create may end in '/' (suffix goes after it)."""
    if sequential and isinstance(path, str):
        validate_path(path + "0")
        return path
    validate_path(path)
    if path == ROOT:
        raise InvalidPathError("cannot create the root node")
    return path  # type: ignore[return-value]


def parent_of(path: str) -> str:
    """'/a/b' -> '/a', '/a' -> '/'."""
    head = path.rsplit("/", 1)[0]
    return head or ROOT


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def ancestors(path: str) -> list[str]:
    """Proper ancestors from the top down, excluding the root: '/a/b/c' -> ['/a', '/a/b']."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def check_value(value: object, limit: int = MAX_VALUE_SIZE) -> bytes:
    """Values are bytes up to `limit`; bytearray/memoryview are copied to bytes."""
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise TypeError(f"value must be bytes, got {type(value).__name__} (use metadata.values.pack)")
    if len(value) > limit:
        raise ValueTooLargeError(f"value of {len(value)} bytes is over the {limit}-byte limit")
    return value
