"""The bookie package's exception hierarchy (server side and the pure codecs it shares).

Everything raised by the bookie server, its file formats and its wire codec derives from
:class:`BookieError`. Storage errors carry the wire status they map to, so the request
handler turns any of them into a reply without a lookup table.
"""

from __future__ import annotations

import errno

from quire import config as quire_config


class BookieError(Exception):
    """Base of every bookie error."""


# --- wire codec -----------------------------------------------------------------------------


class ProtocolError(BookieError, ValueError):
    """Bytes that are not a valid frame, request or response."""


class FrameTooLargeError(ProtocolError):
    """A frame announced a length above the decoder's maximum frame size."""


# --- file formats ---------------------------------------------------------------------------


class FormatError(BookieError, ValueError):
    """A file or record that does not follow its format (bad magic, version, length)."""


class DigestMismatchError(FormatError):
    """An entry's or record's checksum does not match its bytes."""


# --- storage / request outcomes ---------------------------------------------------------------


class StorageError(BookieError):
    """A request failed; ``status`` is the wire status code to answer with (see protocol.Status)."""

    status: int = 501  # IO


class BookieIOError(StorageError):
    """A disk read or write failed (wire status IO)."""

    status = 501


class DiskFullError(BookieIOError):
    """A disk ran out of space: the bookie turns read-only (wire status READ_ONLY)."""

    status = 505


def is_disk_full(exc: BaseException | None) -> bool:
    """True if ``exc`` (or an exception it was raised from) means "no space left": an OSError
    ENOSPC/EDQUOT, or a RocksDB error, which rocksdict raises as a bare Exception with text."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DiskFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc)
        if "No space left on device" in text or "NoSpace" in text:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class NoLedgerError(StorageError):
    """The ledger is unknown to this bookie (wire status NO_LEDGER)."""

    status = 402


class NoEntryError(StorageError):
    """The ledger exists but the entry does not (wire status NO_ENTRY)."""

    status = 403


class BadRequestError(StorageError):
    """A malformed or inconsistent request (wire status BAD_REQUEST)."""

    status = 404


class UnauthorizedError(StorageError):
    """The master key does not match the ledger's (wire status UNAUTHORIZED)."""

    status = 502


class LedgerFencedError(StorageError):
    """The ledger is fenced; only recovery adds are accepted (wire status FENCED)."""

    status = 504


class ReadOnlyError(StorageError):
    """The bookie is read-only (disks over the usage threshold) (wire status READ_ONLY)."""

    status = 505


class TooManyRequestsError(StorageError):
    """The write cache stayed full beyond max_throttle_time_ms (wire status TOO_MANY_REQUESTS)."""

    status = 506


# --- lifecycle ------------------------------------------------------------------------------


class CookieError(BookieError):
    """The cookies on disk and in the metadata store disagree with the configuration."""


class JournalError(BookieError):
    """The journal cannot be replayed (e.g. the file named by the LastLogMark is missing)."""


class ConfigError(BookieError, quire_config.ConfigError):
    """An invalid combination of bookie settings (one ConfigError for every component: an
    ``except quire.config.ConfigError`` catches it, as it catches unknown keys)."""
