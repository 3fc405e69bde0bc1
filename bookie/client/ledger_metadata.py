"""Ledger metadata: the value stored at a ledger's node in the metadata store (pure, msgpack).

Mirrors BookKeeper's ``LedgerMetadataFormat``: ensemble size E, write quorum WQ, ack quorum
AQ, the ensembles (segments keyed by their first entry id), state OPEN / IN_RECOVERY /
CLOSED, last entry id and length (meaningful once closed), digest type, a hash of the
password, creation time and custom metadata. Every change is a compare-and-set on the node
version by the caller; this module only builds and (de)serialises immutable values.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import hashlib
from dataclasses import dataclass, field

import msgpack

__all__ = [
    "LedgerState",
    "LedgerMetadata",
    "encode_metadata",
    "decode_metadata",
    "password_hash",
    "master_key",
    "MetadataFormatError",
    "FORMAT_VERSION",
]

FORMAT_VERSION = 1
DIGEST_CRC32C = "CRC32C"


class MetadataFormatError(ValueError):
    """Bytes that are not a ledger metadata value of a known version."""


class LedgerState(enum.Enum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


def password_hash(password: bytes) -> bytes:
    """What the metadata keeps to check a password at open (never the password itself)."""
    return hashlib.sha256(b"quire-ledger-password\0" + password).digest()


def master_key(password: bytes) -> bytes:
    """The key bookies check on adds and fencing reads: SHA1("ledger" + password) as in BookKeeper."""
    return hashlib.sha1(b"ledger" + password).digest()


@dataclass(frozen=True)
class LedgerMetadata:
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    # (first entry id, bookie ids) in ascending first-entry order; the first starts at 0.
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = -1
    length: int = 0
    digest_type: str = DIGEST_CRC32C
    password_hash: bytes = b""
    ctime_ms: int = 0
    custom_metadata: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        e, wq, aq = self.ensemble_size, self.write_quorum_size, self.ack_quorum_size
        if not (1 <= aq <= wq <= e):
            raise ValueError(f"need 1 <= ack quorum ({aq}) <= write quorum ({wq}) <= ensemble size ({e})")
        if not self.ensembles or self.ensembles[0][0] != 0:
            raise ValueError("the first ensemble must start at entry 0")
        prev = -1
        for first, bookies in self.ensembles:
            if first <= prev:
                raise ValueError("ensemble segments must start at strictly increasing entry ids")
            if len(bookies) != e or len(set(bookies)) != e:
                raise ValueError(f"an ensemble needs {e} distinct bookies, got {list(bookies)}")
            prev = first

    # -- queries ---------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        return self.ensembles[-1][1]

    @property
    def last_ensemble_first_entry(self) -> int:
        return self.ensembles[-1][0]

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble that holds ``entry_id`` (the segment with the largest first id <= it)."""
        firsts = [f for f, _ in self.ensembles]
        i = bisect.bisect_right(firsts, entry_id) - 1
        return self.ensembles[max(i, 0)][1]

    def all_bookies(self) -> set[str]:
        return {b for _, ens in self.ensembles for b in ens}

    # -- transitions (new values; the caller CASes them) -----------------------------------

    def with_state(self, state: LedgerState) -> "LedgerMetadata":
        return dataclasses.replace(self, state=state)

    def closed(self, last_entry_id: int, length: int) -> "LedgerMetadata":
        return dataclasses.replace(self, state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def with_ensemble(self, first_entry_id: int, bookies: tuple[str, ...]) -> "LedgerMetadata":
        """A new segment from ``first_entry_id`` on; replaces the last one if it starts there."""
        segs = list(self.ensembles)
        if first_entry_id < segs[-1][0]:
            raise ValueError(f"a new ensemble cannot start at {first_entry_id}, before {segs[-1][0]}")
        if segs[-1][0] == first_entry_id:
            segs[-1] = (first_entry_id, tuple(bookies))
        else:
            segs.append((first_entry_id, tuple(bookies)))
        return dataclasses.replace(self, ensembles=tuple(segs))

    def with_replaced_bookie(self, first_entry_id: int, index: int, old: str, new: str) -> "LedgerMetadata | None":
        """The segment starting at ``first_entry_id`` with ``new`` in place of ``old`` at ``index``
        (re-replication). None if that slot no longer holds ``old`` (someone replaced it already);
        ValueError if the segment is gone."""
        segs = list(self.ensembles)
        for i, (first, bookies) in enumerate(segs):
            if first == first_entry_id:
                if bookies[index] != old:
                    return None
                segs[i] = (first, bookies[:index] + (new,) + bookies[index + 1:])
                return dataclasses.replace(self, ensembles=tuple(segs))
        raise ValueError(f"no ensemble segment starts at entry {first_entry_id}")

    def same_tail(self, other: "LedgerMetadata") -> bool:
        """Same number of segments and the same last one: only earlier (immutable, re-replicated)
        segments may differ. What a writer or a recoverer owns is the last segment."""
        return len(self.ensembles) == len(other.ensembles) and self.ensembles[-1] == other.ensembles[-1]


def encode_metadata(md: LedgerMetadata) -> bytes:
    return msgpack.packb(
        {
            "format_version": FORMAT_VERSION,
            "ensemble_size": md.ensemble_size,
            "write_quorum_size": md.write_quorum_size,
            "ack_quorum_size": md.ack_quorum_size,
            "ensembles": [[first, list(b)] for first, b in md.ensembles],
            "state": md.state.value,
            "last_entry_id": md.last_entry_id,
            "length": md.length,
            "digest_type": md.digest_type,
            "password_hash": md.password_hash,
            "ctime_ms": md.ctime_ms,
            "custom_metadata": dict(md.custom_metadata),
        },
        use_bin_type=True,
    )


def decode_metadata(data: bytes) -> LedgerMetadata:
    try:
        d = msgpack.unpackb(data, raw=False)
        if not isinstance(d, dict) or d.get("format_version") != FORMAT_VERSION:
            raise MetadataFormatError(f"unknown ledger metadata format {d.get('format_version') if isinstance(d, dict) else d!r}")
        return LedgerMetadata(
            ensemble_size=int(d["ensemble_size"]),
            write_quorum_size=int(d["write_quorum_size"]),
            ack_quorum_size=int(d["ack_quorum_size"]),
            ensembles=tuple((int(first), tuple(str(b) for b in bookies)) for first, bookies in d["ensembles"]),
            state=LedgerState(d["state"]),
            last_entry_id=int(d["last_entry_id"]),
            length=int(d["length"]),
            digest_type=str(d["digest_type"]),
            password_hash=bytes(d["password_hash"]),
            ctime_ms=int(d["ctime_ms"]),
            custom_metadata={str(k): bytes(v) for k, v in d["custom_metadata"].items()},
        )
    except MetadataFormatError:
        raise
    except (KeyError, TypeError, ValueError, msgpack.ExtraData, msgpack.UnpackException) as exc:
        raise MetadataFormatError(f"invalid ledger metadata: {exc}") from None
