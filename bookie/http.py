"""The bookie's HTTP admin endpoint (starlette app served by hypercorn on trio).

``GET /api/v1/bookie/state``  running / read-only / shutting-down flags (BookKeeper's shape)
``GET /api/v1/bookie/info``   free and total disk space
``GET /metrics``              Prometheus text exposition of this bookie's registry

Garbage collection (BookKeeper's paths and shapes, :mod:`bookie.garbage_collector`):
``PUT /api/v1/bookie/gc`` (body ``{"forceMajor": bool, "forceMinor": bool}``, optional) forces
a run in every ledger dir; ``GET /api/v1/bookie/gc`` -> ``{"is_in_force_gc": "true"|"false"}``;
``GET /api/v1/bookie/gc_details`` -> one status object per ledger dir;
``PUT|GET /api/v1/bookie/gc/suspend_compaction`` (``{"suspendMajor", "suspendMinor"}``) and
``PUT /api/v1/bookie/gc/resume_compaction`` (``{"resumeMajor", "resumeMinor"}``);
``GET /api/v1/bookie/entry_logs`` every entry log with its ledgers, usage and age;
``GET|PUT /api/v1/bookie/state/readonly`` (``{"readOnly": bool}``) manual read-only mode.
``GET|PUT /api/v1/bookie/fault/journal_sync_delay`` (``{"delayMs": int}``) a slow journal disk,
for fault-injection tests; PUT only with ``allow_fault_injection``.
BookKeeper's ``/heartbeat``, ``/api/v1/bookie/list_bookies`` and ``/api/v1/ledger/list|metadata``
live in bookie/http_admin.py, as does the ``bookie_ledger_dir_bytes`` gauge of ``/metrics``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bookie.http_admin import ledger_dir_bytes
from bookie.http_admin import routes as operator_routes
from quire.asgi_tls import TlsConfig
from quire.config import naming_the_port
from quire.security.tls import ServerTls
from quire.http_guard import guard_connections

if TYPE_CHECKING:
    from bookie.bookie import Bookie


def build_app(bookie: "Bookie") -> Starlette:
    async def state(_: Request) -> JSONResponse:
        st = bookie.state
        return JSONResponse(
            {
                "running": st.running,
                "readOnly": st.read_only,
                "shuttingDown": st.shutting_down,
                "availableForHighPriorityWrites": st.running and not st.shutting_down,
            }
        )

    async def info(_: Request) -> JSONResponse:
        free, total = await trio.to_thread.run_sync(bookie.storage.disk_usage)
        return JSONResponse(
            {
                "bookieId": bookie.config.bookie_id,
                "freeSpace": free,
                "totalSpace": total,
                "ledgers": sum(1 for s in bookie.storage.states.values() if not s.deleted),
                "lastLogMark": str(bookie.sync_thread.persisted_mark) if bookie.sync_thread else None,
            }
        )

    async def _body(request: Request) -> dict:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ValueError("body must be a JSON object")
        return body

    def _flag(body: dict, name: str) -> bool:
        value = body.get(name, False)
        if isinstance(value, str):
            return value.lower() == "true"
        return bool(value)

    async def gc(request: Request) -> Response:
        if request.method == "GET":
            busy = any(g.in_force_gc for g in bookie.gc)
            return JSONResponse({"is_in_force_gc": "true" if busy else "false"})
        try:
            body = await _body(request)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        for g in bookie.gc:
            g.trigger(_flag(body, "forceMajor"), _flag(body, "forceMinor"))
        return JSONResponse(f"Triggered GC on BookieServer: {bookie.bookie_id}")

    async def gc_details(_: Request) -> JSONResponse:
        return JSONResponse([g.status.to_json() for g in bookie.gc])

    async def suspend_compaction(request: Request) -> Response:
        if request.method == "PUT":
            try:
                body = await _body(request)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            for g in bookie.gc:
                g.suspend_major = g.suspend_major or _flag(body, "suspendMajor")
                g.suspend_minor = g.suspend_minor or _flag(body, "suspendMinor")
        return _suspended()

    def _suspended() -> JSONResponse:
        return JSONResponse(
            {
                "isMajorGcSuspended": str(any(g.suspend_major for g in bookie.gc)).lower(),
                "isMinorGcSuspended": str(any(g.suspend_minor for g in bookie.gc)).lower(),
            }
        )

    async def resume_compaction(request: Request) -> Response:
        try:
            body = await _body(request)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        for g in bookie.gc:
            if _flag(body, "resumeMajor"):
                g.suspend_major = False
            if _flag(body, "resumeMinor"):
                g.suspend_minor = False
        return _suspended()

    async def entry_logs(_: Request) -> JSONResponse:
        dirs = []
        for g in bookie.gc:
            logs = await trio.to_thread.run_sync(g.entry_log_report)
            dirs.append({"dir": str(g.dir.current), "entryLogs": logs})
        return JSONResponse(dirs)

    async def readonly(request: Request) -> Response:
        st = bookie.state
        if request.method == "PUT":
            try:
                body = await _body(request)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            if "readOnly" not in body:
                return JSONResponse({"error": "body needs readOnly"}, status_code=400)
            want = _flag(body, "readOnly")
            st.manual_read_only = want
            if want != st.read_only:
                st.read_only = want
                bookie.metrics.read_only.set(1 if want else 0)
                if not want:  # a full disk still wins
                    await trio.to_thread.run_sync(bookie.registration.check_disks)
                await bookie.registration.register()
        return JSONResponse({"readOnly": st.read_only})

    async def journal_sync_delay(request: Request) -> Response:
        # A slow disk for fault-injection tests (the chaos harness); refused unless the bookie
        # was started with allow_fault_injection.
        cfg = bookie.config
        if request.method == "PUT":
            if not cfg.allow_fault_injection:
                return JSONResponse({"error": "fault injection is disabled (allow_fault_injection=false)"},
                                    status_code=403)
            try:
                body = await _body(request)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            delay = body.get("delayMs")
            if not isinstance(delay, int) or isinstance(delay, bool) or not 0 <= delay <= 10_000:
                return JSONResponse({"error": "delayMs must be an integer from 0 to 10000"}, status_code=400)
            cfg.journal_test_sync_delay_ms = delay
        return JSONResponse({"delayMs": cfg.journal_test_sync_delay_ms})

    async def metrics(_: Request) -> Response:
        bookie.publish_metrics()
        await ledger_dir_bytes(bookie)
        return Response(bookie.metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    app = Starlette(
        routes=[
            Route("/api/v1/bookie/state", state),
            Route("/api/v1/bookie/info", info),
            Route("/api/v1/bookie/gc", gc, methods=["GET", "PUT"]),
            Route("/api/v1/bookie/gc_details", gc_details),
            Route("/api/v1/bookie/gc/suspend_compaction", suspend_compaction, methods=["GET", "PUT"]),
            Route("/api/v1/bookie/gc/resume_compaction", resume_compaction, methods=["PUT"]),
            Route("/api/v1/bookie/entry_logs", entry_logs),
            Route("/api/v1/bookie/state/readonly", readonly, methods=["GET", "PUT"]),
            Route("/api/v1/bookie/fault/journal_sync_delay", journal_sync_delay, methods=["GET", "PUT"]),
            Route("/metrics", metrics),
            *operator_routes(bookie),  # bookie/http_admin.py: heartbeat, list_bookies, ledger list/metadata
        ]
    )
    return app if bookie.authenticator is None else _RequireToken(app, bookie)  # type: ignore[return-value]


class _RequireToken:
    """With a bookie identity configured, the admin API wants the same token as the bookie
    protocol (``Authorization: Bearer``, an allowed role); ``/metrics`` stays open to scrapers."""

    def __init__(self, app: Starlette, bookie: "Bookie") -> None:
        self.app, self.bookie = app, bookie

    async def __call__(self, scope: dict, receive: object, send: object) -> None:
        if scope["type"] == "http" and scope.get("path") not in ("/metrics", "/metrics/"):
            header = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, token = header.partition(b" ")
            auth = self.bookie.authenticator
            if auth is None or scheme.lower() != b"bearer" or auth.role(token.strip()) is None:
                await JSONResponse({"reason": "a valid bookie token is required"}, status_code=401)(
                    scope, receive, send)  # type: ignore[arg-type]
                return
        await self.app(scope, receive, send)  # type: ignore[arg-type]


def http_tls(bookie: "Bookie") -> ServerTls | None:
    """The HTTPS context of the HTTP port (None: plain HTTP), from ``http_server_tls_enable``."""
    cfg = bookie.config
    if not cfg.http_server_tls_enable:
        return None
    cert, key = ((cfg.http_server_key_store_path, cfg.http_server_key_store_path) if cfg.http_server_key_store_path
                 else (cfg.tls_certificate_path, cfg.tls_key_store))
    return ServerTls(cert, key, refresh_seconds=cfg.tls_cert_files_refresh_duration_seconds, alpn=["http/1.1"])


async def serve_http(
    bookie: "Bookie", host: str, port: int, shutdown: trio.Event, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve until ``shutdown`` is set; ``task_status.started`` gets the bound port. With
    ``http_server_tls_enable`` the port speaks HTTPS only (hypercorn's "bind" is its TLS side)."""
    guard_connections()  # one client's broken connection must not end the process
    tls = http_tls(bookie)
    cfg = TlsConfig()
    cfg.tls = tls
    cfg.bind = [f"{host}:{port}"]
    cfg.accesslog = None
    cfg.errorlog = None
    cfg.graceful_timeout = 1.0

    class _Status:
        def started(self, binds: list[str]) -> None:
            task_status.started(int(binds[0].rsplit(":", 1)[1]))

    with naming_the_port("http_server_port", host, port):
        async with trio.open_nursery() as nursery:
            if tls is not None:
                nursery.start_soon(tls.watch)
            await serve(build_app(bookie), cfg, shutdown_trigger=shutdown.wait, task_status=_Status())  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()
