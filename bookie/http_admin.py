"""BookKeeper's REST routes for operators, beside bookie/http.py's core ones.

``GET /heartbeat``                      ``OK`` while the HTTP server runs (BookKeeper's liveness probe)
``GET /api/v1/bookie/list_bookies``     ``?type=rw|ro`` (default rw): ``{"<bookie id>": null, ...}``, as
                                        BookKeeper answers without ``print_hostnames``
``GET /api/v1/ledger/list``             ``{"<ledger id>": null | metadata}`` of every ledger in the
                                        metadata store (``?print_metadata=true`` for the metadata)
``GET /api/v1/ledger/metadata``         ``?ledger_id=N``: one ledger's metadata (404 if unknown)

and ``ledger_dir_bytes``: the ``bookie_ledger_dir_bytes{dir=...}`` gauge (bytes of entry logs
and indexes in each ledger dir), refreshed before each ``/metrics`` scrape.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bookie.registration import AVAILABLE_PATH, READONLY_PATH
from metadata.errors import MetadataError, NotFoundError

if TYPE_CHECKING:
    from bookie.bookie import Bookie

MAX_LISTED_LEDGERS = 100_000


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"reason": reason}, status_code=status)


def metadata_json(md: Any) -> dict[str, Any]:
    """A ledger's metadata in BookKeeper's REST field names."""
    return {
        "ensembleSize": md.ensemble_size, "writeQuorumSize": md.write_quorum_size, "ackQuorumSize": md.ack_quorum_size,
        "state": md.state.value, "lastEntryId": md.last_entry_id, "length": md.length,
        "digestType": md.digest_type, "ctime": md.ctime_ms,
        "allEnsembles": {str(first): list(bookies) for first, bookies in md.ensembles},
        "customMetadata": {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                           for k, v in md.custom_metadata.items()},
    }


def dir_bytes(current: Path) -> int:
    total = 0
    for root, _, files in os.walk(current):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass  # removed meanwhile (GC, compaction)
    return total


async def ledger_dir_bytes(bookie: "Bookie") -> None:
    for d in bookie.storage.dirs:
        size = await trio.to_thread.run_sync(dir_bytes, d.current)
        bookie.metrics.ledger_dir_bytes.labels(str(d.current.parent)).set(size)


def routes(bookie: "Bookie") -> list[Route]:
    async def heartbeat(_: Request) -> Response:
        return PlainTextResponse("OK\n")

    async def list_bookies(request: Request) -> Response:
        if bookie.store is None:
            return _error(503, "this bookie has no metadata store (--metadata-url)")
        kind = request.query_params.get("type", "rw")
        if kind not in ("rw", "ro"):
            return _error(400, "type must be rw or ro")
        path = AVAILABLE_PATH if kind == "rw" else READONLY_PATH
        try:
            ids = [b for b in await bookie.store.children(path) if b != "readonly"]
        except NotFoundError:
            ids = []
        return JSONResponse({b: None for b in sorted(ids)})

    async def ledger_list(request: Request) -> Response:
        from bookie.client.ledger_metadata import decode_metadata
        from metadata.ledger_ids import iter_ledger_ids, ledger_path

        if bookie.store is None:
            return _error(503, "this bookie has no metadata store (--metadata-url)")
        with_md = request.query_params.get("print_metadata", "false").lower() == "true"
        out: dict[str, Any] = {}
        async for lid in iter_ledger_ids(bookie.store):
            if len(out) >= MAX_LISTED_LEDGERS:
                break
            value = None
            if with_md:
                try:
                    raw, _ = await bookie.store.get(ledger_path(lid))
                    value = metadata_json(decode_metadata(raw))
                except (MetadataError, ValueError):
                    continue  # deleted meanwhile, or not a ledger node
            out[str(lid)] = value
        return JSONResponse(out)

    async def ledger_metadata(request: Request) -> Response:
        from bookie.client.ledger_metadata import decode_metadata
        from metadata.ledger_ids import ledger_path

        if bookie.store is None:
            return _error(503, "this bookie has no metadata store (--metadata-url)")
        try:
            lid = int(request.query_params["ledger_id"])
        except (KeyError, ValueError):
            return _error(400, "ledger_id=N is required")
        try:
            raw, _ = await bookie.store.get(ledger_path(lid))
        except NotFoundError:
            return _error(404, f"ledger {lid} does not exist")
        return JSONResponse({str(lid): metadata_json(decode_metadata(raw))})

    return [
        Route("/heartbeat", heartbeat),
        Route("/api/v1/bookie/list_bookies", list_bookies),
        Route("/api/v1/ledger/list", ledger_list),
        Route("/api/v1/ledger/metadata", ledger_metadata),
    ]
