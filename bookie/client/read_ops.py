"""Read operations: entry reads with failover and speculation, LAC reads, fencing and long polls.

Every op sends its requests through the connection pool with callbacks and is driven by the
caller's own task (no task per entry or per bookie): the caller waits on one event, and for
entry reads wakes up on the speculative timeout to ask the next replica of entries whose
asked bookies have not answered yet. Every entry is digest-checked (CRC32C, ledger and entry
id) before it is accepted; a bad digest counts as an unknown reply and the next replica is tried.
The one exception: a range read answered in process by a co-located bookie (``verified``
replies, bookie.client.local_bookie) was checked by that bookie against the checksums it
stored and never left memory, so only its ids are checked.

:func:`read_entries` reads a segment whose every bookie holds every entry (E == WQ, Pulsar's
default 2/2/2) with RANGE_READ requests to one replica (BookKeeper's batch read): one request
and one reply for up to ``max_entries_per_read_batch`` entries instead of one per entry.
Whatever a range read does not return verified (an error, a short or slow answer, a bad
digest) is read entry by entry with failover and speculation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from bookie import entry_format
from bookie.client.distribution import CLIENT_TIMEOUT, QuorumCoverage, ReplyKind, classify, write_set
from bookie.client.errors import (
    BKDigestMismatchError,
    BKError,
    BKLedgerRecoveryError,
    BKNoSuchEntryError,
    BKReadError,
    BKTimeoutError,
    BKUnauthorizedAccessError,
)
from bookie.client.ledger_metadata import LedgerMetadata
from bookie.errors import FormatError
from bookie.protocol import Flag, Op, Request, Response, Status

if TYPE_CHECKING:
    from bookie.client.client_context import ClientContext

__all__ = ["verified_entry", "PendingReadOp", "read_entries", "read_lac", "LacReadResult", "long_poll_lac"]


def verified_entry(data: bytes, ledger_id: int, entry_id: int) -> entry_format.EntryHeader | None:
    """The header if ``data`` is entry ``ledger_id:entry_id`` with a valid digest, else None."""
    try:
        hdr = entry_format.verify(data)
    except FormatError:
        return None
    if hdr.ledger_id != ledger_id or hdr.entry_id != entry_id:
        return None
    return hdr


class _EntryRead:
    __slots__ = ("entry_id", "replicas", "next_idx", "outstanding", "data", "negatives", "unknowns",
                 "digest_errors", "timeouts")

    def __init__(self, entry_id: int, replicas: list[str]) -> None:
        self.entry_id = entry_id
        self.replicas = replicas
        self.next_idx = 0
        self.outstanding = 0
        self.data: bytes | None = None
        self.negatives = self.unknowns = self.digest_errors = self.timeouts = 0


class PendingReadOp:
    """Reads entries ``first..last`` (full entry bytes, verified) from their write sets."""

    def __init__(self, client: "ClientContext", ledger_id: int, md: LedgerMetadata, first: int, last: int,
                 master_key: bytes = b"") -> None:
        self._client = client
        self._ledger_id = ledger_id
        self._master_key = master_key
        self._entries = [_EntryRead(e, self._replicas(md, e)) for e in range(first, last + 1)]
        self._remaining = len(self._entries)
        self._done = trio.Event()
        self._error: BKError | None = None

    def _replicas(self, md: LedgerMetadata, entry_id: int) -> list[str]:
        ens = md.ensemble_for(entry_id)
        bookies = [ens[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum_size)]
        if self._client.config.reorder_read_sequence_enabled:
            bad = self._client.quarantined()
            if bad:
                bookies.sort(key=lambda b: b in bad)  # stable: healthy first, in write-set order
        return bookies

    async def run(self) -> list[bytes]:
        if not self._entries:
            return []
        for er in self._entries:
            self._send_next(er)
        cfg = self._client.config
        timeout = cfg.first_speculative_read_timeout_ms / 1000
        while not self._done.is_set():
            with trio.move_on_after(timeout):
                await self._done.wait()
            if self._done.is_set():
                break
            for er in self._entries:
                if er.data is None and er.outstanding > 0 and er.next_idx < len(er.replicas):
                    self._send_next(er)  # speculative: the asked bookies are all silent
            timeout = min(timeout * cfg.speculative_read_timeout_backoff_multiplier,
                          cfg.max_speculative_read_timeout_ms / 1000)
        if self._error is not None:
            raise self._error
        return [er.data for er in self._entries]  # type: ignore[misc]

    def _send_next(self, er: _EntryRead) -> None:
        bookie = er.replicas[er.next_idx]
        er.next_idx += 1
        er.outstanding += 1
        req = Request(Op.READ, 0, self._ledger_id, er.entry_id, 0, self._master_key)
        self._client.send(bookie, req, lambda status, resp: self._on_reply(er, bookie, status, resp),
                          self._client.config.read_timeout_s)

    def _on_reply(self, er: _EntryRead, bookie: str, status: int, resp: Response | None) -> None:
        er.outstanding -= 1
        if er.data is not None or self._done.is_set():
            return
        if status == Status.OK and resp is not None:
            if verified_entry(resp.body, self._ledger_id, er.entry_id) is not None:
                er.data = resp.body
                self._remaining -= 1
                if self._remaining == 0:
                    self._done.set()
                return
            er.digest_errors += 1
        else:
            kind = classify(status)
            if kind is ReplyKind.NEGATIVE:
                er.negatives += 1
            else:
                er.unknowns += 1
                er.timeouts += status == CLIENT_TIMEOUT
                self._client.note_bookie_failure(bookie)
        if er.outstanding == 0:
            if er.next_idx < len(er.replicas):
                self._send_next(er)
            else:
                self._error = self._failure(er)
                self._done.set()

    def _failure(self, er: _EntryRead) -> BKError:
        where = f"entry {self._ledger_id}:{er.entry_id} from {er.replicas}"
        if er.negatives == len(er.replicas):
            return BKNoSuchEntryError(f"no replica has {where}")
        if er.digest_errors:
            return BKDigestMismatchError(f"digest mismatch reading {where}")
        if er.timeouts and er.timeouts + er.negatives == len(er.replicas):
            return BKTimeoutError(f"timed out reading {where}")
        return BKReadError(f"could not read {where} ({er.negatives} negative, {er.unknowns} failed)")


async def read_entries(client: "ClientContext", ledger_id: int, md: LedgerMetadata, first: int, last: int,
                       master_key: bytes = b"") -> list[bytes]:
    """Entries ``first..last`` (full entry bytes, verified): by range where E == WQ, else per entry."""
    if md.ensemble_size != md.write_quorum_size:
        return await PendingReadOp(client, ledger_id, md, first, last, master_key).run()
    firsts = [f for f, _ in md.ensembles]
    out: list[bytes] = []
    lo = first
    while lo <= last:
        # the segment holding lo ends where the next one starts
        seg_end = last
        for f in firsts:
            if f > lo:
                seg_end = min(last, f - 1)
                break
        got = await _range_read(client, ledger_id, md, lo, seg_end, master_key)
        out.extend(got)
        lo += len(got)
        if not got:  # no verified answer: entry by entry, with failover and speculation
            out.extend(await PendingReadOp(client, ledger_id, md, lo, seg_end, master_key).run())
            lo = seg_end + 1
    return out


async def _range_read(client: "ClientContext", ledger_id: int, md: LedgerMetadata, first: int, last: int,
                      master_key: bytes) -> list[bytes]:
    """The verified prefix of one RANGE_READ of ``first..last`` from one replica ([] if none)."""
    ensemble = md.ensemble_for(first)
    bookies = [ensemble[i] for i in write_set(first, md.ensemble_size, md.write_quorum_size)]
    bad = client.quarantined()
    if bad:
        bookies.sort(key=lambda b: b in bad)  # healthy first; the write set rotates the load
    bookie = bookies[0]
    done = trio.Event()
    reply: list[Response] = []

    def on_reply(status: int, resp: Response | None) -> None:
        if status == Status.OK and resp is not None:
            reply.append(resp)
        elif classify(status) is ReplyKind.UNKNOWN:
            client.note_bookie_failure(bookie)
        done.set()

    cfg = client.config
    req = Request(Op.RANGE_READ, 0, ledger_id, first, 0, master_key, last_entry_id=last,
                  max_entries=last - first + 1)
    client.send(bookie, req, on_reply, cfg.read_timeout_s)
    # a slow replica is left behind after the speculative timeout, as for single reads
    with trio.move_on_after(cfg.first_speculative_read_timeout_ms / 1000):
        await done.wait()
    if not reply:
        return []
    entries = reply[0].entries
    if reply[0].verified and entries:
        # An in-process bookie verified the checksums it stored and read these by their ids
        # (its index and caches are keyed by them, a run checks each record's ids, an add's
        # entry header must carry the ids it is stored under): the first and last entries
        # naming the ids asked for show the reply is the range asked for, without a look
        # at each entry (one per message a catch-up read sends).
        got = entries[: last - first + 1]
        if (entry_format.has_ids(got[0], ledger_id, first)
                and entry_format.has_ids(got[-1], ledger_id, first + len(got) - 1)):
            return got
    out: list[bytes] = []
    is_entry = entry_format.has_ids if reply[0].verified else entry_format.is_entry
    for eid, data in enumerate(entries, first):
        if eid > last or not is_entry(data, ledger_id, eid):
            break
        out.append(data)
    return out


@dataclass
class LacReadResult:
    lac: int = -1
    covered: bool = False
    # index in the ensemble -> reply kind, for the replies that arrived
    replies: dict[int, ReplyKind] = field(default_factory=dict)
    unauthorized: bool = False


async def read_lac(client: "ClientContext", ledger_id: int, md: LedgerMetadata, *, fence: bool,
                   master_key: bytes) -> LacReadResult:
    """READ entry -1 on every bookie of the last ensemble (with FENCE when recovering).

    Completes on quorum coverage of the ensemble (or once every bookie answered); the LAC is the
    maximum over the replies of the bookie's LAC and the digest-verified LAC in its last entry.
    """
    ensemble = md.last_ensemble
    coverage = QuorumCoverage(md.ensemble_size, md.write_quorum_size, md.ack_quorum_size)
    result = LacReadResult()
    done = trio.Event()
    left = len(ensemble)

    def on_reply(index: int, status: int, resp: Response | None) -> None:
        nonlocal left
        left -= 1
        kind = classify(status)
        if status == Status.OK and resp is not None:
            lac = resp.lac
            if fence and resp.body:  # a fencing read returns the bookie's last entry
                try:
                    hdr: entry_format.EntryHeader | None = entry_format.verify(resp.body)
                except FormatError:
                    hdr = None
                if hdr is None or hdr.ledger_id != ledger_id:
                    kind = ReplyKind.UNKNOWN  # garbled: we cannot count it as a fenced reply
                else:
                    lac = max(lac, hdr.lac)
            if kind is ReplyKind.POSITIVE:
                result.lac = max(result.lac, lac)
        if status == Status.UNAUTHORIZED:
            result.unauthorized = True
        if kind is ReplyKind.UNKNOWN:
            client.note_bookie_failure(ensemble[index])
        result.replies[index] = kind
        coverage.add(index, kind)
        if coverage.covered or left == 0 or coverage.impossible:
            done.set()

    flags = int(Flag.FENCE) if fence else 0
    for i, bookie in enumerate(ensemble):
        req = Request(Op.READ, 0, ledger_id, -1, flags, master_key)
        client.send(bookie, req, functools.partial(on_reply, i), client.config.read_timeout_s)
    await done.wait()
    result.covered = coverage.covered
    if fence and not result.covered:
        if result.unauthorized:
            raise BKUnauthorizedAccessError(f"ledger {ledger_id}: bookies refused the master key")
        raise BKLedgerRecoveryError(
            f"ledger {ledger_id}: fencing did not reach quorum coverage of {list(ensemble)} (replies {result.replies})"
        )
    if not fence and not any(k is not ReplyKind.UNKNOWN for k in result.replies.values()):
        raise BKReadError(f"ledger {ledger_id}: no bookie of {list(ensemble)} answered the LAC read")
    return result


async def long_poll_lac(client: "ClientContext", ledger_id: int, md: LedgerMetadata, previous_lac: int,
                        timeout_s: float) -> int:
    """Wait (up to ``timeout_s``) until some bookie of the last ensemble reports LAC > previous_lac.

    Returns the highest LAC seen (``previous_lac`` or lower-bounded by it if nothing advanced).
    """
    ensemble = md.last_ensemble
    done = trio.Event()
    best = previous_lac
    left = len(ensemble)

    def on_reply(status: int, resp: Response | None) -> None:
        nonlocal left, best
        left -= 1
        if status == Status.OK and resp is not None and resp.lac > best:
            best = resp.lac
        if best > previous_lac or left == 0:
            done.set()

    timeout_ms = max(1, int(timeout_s * 1000))
    for bookie in ensemble:
        req = Request(Op.READ, 0, ledger_id, -1, 0, b"", previous_lac=previous_lac, timeout_ms=timeout_ms)
        client.send(bookie, req, on_reply, timeout_s + client.config.read_timeout_s)
    with trio.move_on_after(timeout_s + client.config.read_timeout_s):
        await done.wait()
    return best
