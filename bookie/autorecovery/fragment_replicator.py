"""Copy one ledger fragment to a new bookie (BookKeeper's ``LedgerFragmentReplicator``).

A fragment is the share of one ensemble segment that the bookie at ``index`` stores: the
entries of the segment whose write set includes ``index`` (all of them when E == WQ). The
entries are read from the other replicas of their write sets, surviving bookies first (a
decommissioned bookie that still answers is the last resort), verified (digest, ledger and
entry id), and added byte for byte to the target with RECOVERY_ADD (accepted on a fenced
ledger; the bookie acks only after its journal fsync).

Reads: E == WQ segments use RANGE_READ (``rereplication_entry_batch_size`` entries per request,
each reply written as it arrives); otherwise one READ per entry. A batch that a source cannot
serve whole is continued from the next source. Up to ``_BATCHES_IN_FLIGHT`` batches are read and written at once, so reads from
the source and adds to the target overlap. The caller changes the metadata only after
:func:`copy_fragment` returned: a copy that failed half way leaves the ensemble as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from bookie.autorecovery.errors import ReplicationError
from bookie.client.distribution import write_set
from bookie.client.errors import BKError
from bookie.client.ledger_metadata import LedgerMetadata
from bookie.client.read_ops import verified_entry
from bookie.protocol import Flag, Op, Request, Response, Status

if TYPE_CHECKING:
    from bookie.client.client_context import ClientContext

__all__ = ["Fragment", "fragments_on", "copy_fragment", "CopyStats", "fragment_ends", "fragment_lacks_entries"]

_BATCHES_IN_FLIGHT = 4


@dataclass(frozen=True)
class Fragment:
    """Entries ``first..last`` of the segment starting at ``first`` held by ``ensemble[index]``."""

    first: int
    last: int  # < first: an empty segment (nothing to copy, only the metadata to fix)
    index: int
    ensemble: tuple[str, ...]

    @property
    def bookie(self) -> str:
        return self.ensemble[self.index]


@dataclass
class CopyStats:
    entries: int = 0
    bytes: int = 0


def fragments_on(md: LedgerMetadata, bookies: set[str], *, include_open_tail: bool = False) -> list[Fragment]:
    """The fragments of ``md`` held by any of ``bookies``. The last segment of a ledger that is
    not closed has no known end: left out unless ``include_open_tail`` (then it ends at -1 + first,
    i.e. it is reported with ``last < first``, for the caller to handle)."""
    out: list[Fragment] = []
    segs = md.ensembles
    for i, (first, ensemble) in enumerate(segs):
        is_tail = i == len(segs) - 1
        if is_tail and not md.is_closed:
            if not include_open_tail:
                continue
            last = first - 1
        else:
            last = md.last_entry_id if is_tail else segs[i + 1][0] - 1
            if md.is_closed:
                last = min(last, md.last_entry_id)  # nothing past the end is committed
        for idx, b in enumerate(ensemble):
            if b in bookies:
                out.append(Fragment(first, last, idx, ensemble))
    return out


async def _request(ctx: "ClientContext", bookie: str, req: Request, timeout_s: float) -> tuple[int, Response | None]:
    done = trio.Event()
    out: list[tuple[int, Response | None]] = []

    def on_reply(status: int, resp: Response | None) -> None:
        out.append((status, resp))
        done.set()

    ctx.send(bookie, req, on_reply, timeout_s)
    await done.wait()
    return out[0]


class _Copy:
    def __init__(self, ctx: "ClientContext", ledger_id: int, md: LedgerMetadata, frag: Fragment, target: str,
                 master_key: bytes, lost: set[str], batch_size: int) -> None:
        self.ctx = ctx
        self.ledger_id = ledger_id
        self.md = md
        self.frag = frag
        self.target = target
        self.master_key = master_key
        self.lost = lost
        self.batch_size = max(1, batch_size)
        self.stats = CopyStats()

    def sources(self, entry_id: int) -> list[str]:
        """The other replicas of ``entry_id``: surviving ones first, healthy before quarantined."""
        ens, e, wq = self.frag.ensemble, self.md.ensemble_size, self.md.write_quorum_size
        others = [ens[i] for i in write_set(entry_id, e, wq) if i != self.frag.index]
        bad = self.ctx.quarantined()
        return sorted(others, key=lambda b: (b in self.lost, b in bad))

    def batches(self) -> Iterator[list[int]]:
        """The fragment's entry ids in batches of ``batch_size`` (generated: a fragment may hold
        millions of entries)."""
        f = self.frag
        e, wq = self.md.ensemble_size, self.md.write_quorum_size
        batch: list[int] = []
        for eid in range(f.first, f.last + 1):
            if e == wq or f.index in write_set(eid, e, wq):
                batch.append(eid)
                if len(batch) == self.batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch

    async def run(self) -> CopyStats:
        contiguous = self.md.ensemble_size == self.md.write_quorum_size
        limiter = trio.Semaphore(_BATCHES_IN_FLIGHT)
        async with trio.open_nursery() as nursery:
            for batch in self.batches():
                await limiter.acquire()
                nursery.start_soon(self._batch, batch, contiguous, limiter)
        return self.stats

    async def _batch(self, batch: list[int], contiguous: bool, limiter: trio.Semaphore) -> None:
        try:
            if contiguous:
                # a bookie caps a range reply (4 MiB): each reply is written as it comes, so a
                # batch of large entries never sits in memory whole
                lo, last = batch[0], batch[-1]
                while lo <= last:
                    chunk = await self._range_chunk(lo, last)
                    await self._write(list(range(lo, lo + len(chunk))), chunk)
                    lo += len(chunk)
            else:
                data: list[bytes] = [b""] * len(batch)

                async def one(i: int, eid: int) -> None:
                    data[i] = await self._one(eid)

                async with trio.open_nursery() as nursery:  # the batch's reads in parallel
                    for i, eid in enumerate(batch):
                        nursery.start_soon(one, i, eid)
                await self._write(batch, data)
        finally:
            limiter.release()

    async def _range_chunk(self, lo: int, last: int) -> list[bytes]:
        """The verified entries from ``lo`` on (at least one, at most up to ``last``) that the
        first source able to serve ``lo`` returns in one RANGE_READ."""
        timeout = self.ctx.config.read_timeout_s
        errors: list[str] = []
        for source in self.sources(lo):
            req = Request(Op.RANGE_READ, 0, self.ledger_id, lo, 0, self.master_key, last_entry_id=last,
                          max_entries=last - lo + 1)
            status, resp = await _request(self.ctx, source, req, timeout)
            out: list[bytes] = []
            if status == Status.OK and resp is not None:
                for eid, data in enumerate(resp.entries, lo):
                    if eid > last or verified_entry(data, self.ledger_id, eid) is None:
                        break
                    out.append(data)
            if out:
                return out
            errors.append(f"{source}: status {status}")
            if status not in (Status.OK, Status.NO_ENTRY, Status.NO_LEDGER):
                self.ctx.note_bookie_failure(source)
        raise ReplicationError(f"ledger {self.ledger_id}: no replica served entry {lo} ({'; '.join(errors)})")

    async def _one(self, entry_id: int) -> bytes:
        timeout = self.ctx.config.read_timeout_s
        errors = []
        for source in self.sources(entry_id):
            req = Request(Op.READ, 0, self.ledger_id, entry_id, 0, self.master_key)
            status, resp = await _request(self.ctx, source, req, timeout)
            if status == Status.OK and resp is not None and verified_entry(resp.body, self.ledger_id, entry_id):
                return resp.body
            errors.append(f"{source}: status {status}")
        raise ReplicationError(f"ledger {self.ledger_id}: no replica served entry {entry_id} ({'; '.join(errors)})")

    async def _write(self, ids: list[int], data: list[bytes]) -> None:
        """Add the batch to the target; returns once every add is acked (journal fsynced)."""
        conn = self.ctx.connection(self.target)
        left = len(ids)
        failed: list[str] = []
        done = trio.Event()

        def on_ack(eid: int, status: int, _resp: object = None) -> None:
            nonlocal left
            left -= 1
            if status != Status.OK:
                failed.append(f"{eid}: status {status}")
            if left == 0:
                done.set()

        flags = int(Flag.RECOVERY_ADD)
        timeout = self.ctx.config.add_entry_timeout_s
        for eid, entry in zip(ids, data, strict=True):
            conn.send_add(self.ledger_id, eid, flags, self.master_key, entry, functools.partial(on_ack, eid), timeout)
        await done.wait()
        if failed:
            raise ReplicationError(f"ledger {self.ledger_id}: {self.target} refused adds ({', '.join(failed[:5])})")
        self.stats.entries += len(ids)
        self.stats.bytes += sum(len(d) for d in data)


async def copy_fragment(ctx: "ClientContext", ledger_id: int, md: LedgerMetadata, frag: Fragment, target: str,
                        master_key: bytes, lost: set[str], batch_size: int) -> CopyStats:
    """Copy ``frag`` to ``target``; ReplicationError if some entry could not be read or written
    (one error, not the group the copy's nurseries raise: the caller handles it like any other)."""
    try:
        return await _Copy(ctx, ledger_id, md, frag, target, master_key, lost, batch_size).run()
    except* (ReplicationError, BKError) as group:
        raise _first_leaf(group) from None


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def fragment_ends(frag: Fragment, ensemble_size: int, write_quorum: int) -> list[int]:
    """The first and last entries of the segment that ``frag``'s bookie stores (BookKeeper's
    LedgerChecker reads these two when ``auditorLedgerVerificationPercentage`` is 0)."""
    def held(eid: int) -> bool:
        return frag.index in write_set(eid, ensemble_size, write_quorum)

    span = range(frag.first, frag.last + 1)
    first = next((e for e in span[:ensemble_size] if held(e)), None)
    last = next((e for e in reversed(span[-ensemble_size:]) if held(e)), None)
    return sorted({e for e in (first, last) if e is not None})


async def fragment_lacks_entries(ctx: "ClientContext", ledger_id: int, md: LedgerMetadata, frag: Fragment) -> bool:
    """True if ``frag``'s bookie answers NO_ENTRY/NO_LEDGER for an end of its share (an
    unanswered read proves nothing: False)."""
    for eid in fragment_ends(frag, md.ensemble_size, md.write_quorum_size):
        status, _ = await _request(ctx, frag.bookie, Request(Op.READ, 0, ledger_id, eid, 0, b""),
                                   ctx.config.read_timeout_s)
        if status in (Status.NO_ENTRY, Status.NO_LEDGER):
            return True
    return False
