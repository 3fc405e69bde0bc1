"""The bookie's HTTP admin endpoint (starlette app served by hypercorn on trio).

``GET /api/v1/bookie/state``  running / read-only / shutting-down flags (BookKeeper's shape)
``GET /api/v1/bookie/info``   free and total disk space
``GET /metrics``              Prometheus text exposition of this bookie's registry
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bookie.http_guard import guard_connections

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

    async def metrics(_: Request) -> Response:
        bookie.publish_metrics()
        return Response(bookie.metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return Starlette(
        routes=[
            Route("/api/v1/bookie/state", state),
            Route("/api/v1/bookie/info", info),
            Route("/metrics", metrics),
        ]
    )


async def serve_http(
    bookie: "Bookie", host: str, port: int, shutdown: trio.Event, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve until ``shutdown`` is set; ``task_status.started`` gets the bound port."""
    guard_connections()  # one client's broken connection must not end the process
    cfg = HypercornConfig()
    cfg.bind = [f"{host}:{port}"]
    cfg.accesslog = None
    cfg.errorlog = None
    cfg.graceful_timeout = 1.0

    class _Status:
        def started(self, binds: list[str]) -> None:
            task_status.started(int(binds[0].rsplit(":", 1)[1]))

    await serve(build_app(bookie), cfg, shutdown_trigger=shutdown.wait, task_status=_Status())  # type: ignore[arg-type]
