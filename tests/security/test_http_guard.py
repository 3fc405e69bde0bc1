"""The per-connection guard of our hypercorn servers (quire/http_guard.py) covers a connection's
setup too: an exception raised while the connection is being built (here: the TLS scope hook of
quire/asgi_tls.py fails, injected) drops that connection, logs one line, and the server keeps
serving. Before, only the connection's run step was guarded: the same exception reached the
listener's nursery and ended the server (the whole broker or bookie process)."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypercorn.trio import serve

from quire import asgi_tls
from quire.asgi_tls import TlsConfig, install_tls_scope
from quire.http_guard import guard_connections
from quire.security.tls import ServerTls
from tests.fixtures.processes import free_port
from tests.security.certs import CertificateAuthority


async def hello(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


async def test_a_failing_connection_setup_leaves_the_server_serving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    ca = CertificateAuthority(tmp_path)
    server = ca.issue("server", "server", ips=("127.0.0.1",))
    guard_connections()
    install_tls_scope()
    config = TlsConfig()
    config.tls = ServerTls(str(server.cert), str(server.key), alpn=["http/1.1"])
    config.bind = [f"127.0.0.1:{free_port()}"]
    config.graceful_timeout = 0.5
    shutdown = trio.Event()
    url = "https://" + config.bind[0]
    verify = ssl.create_default_context(cafile=str(ca.file))

    def get() -> int:
        return httpx.get(url, verify=verify, timeout=10).status_code

    def broken_hook(self: Any, app: Any, stream: Any) -> None:
        raise RuntimeError("injected: the TLS scope hook failed")

    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve(hello, config, shutdown_trigger=shutdown.wait,  # type: ignore[arg-type]
                                                      task_status=task_status))
        assert await trio.to_thread.run_sync(get) == 200
        monkeypatch.setattr(asgi_tls._WithTlsScope, "__init__", broken_hook)
        with caplog.at_level(logging.WARNING, logger="quire.http_guard"):
            with pytest.raises(httpx.HTTPError):
                await trio.to_thread.run_sync(get)
        monkeypatch.undo()
        assert await trio.to_thread.run_sync(get) == 200  # the server is still there
        dropped = [r for r in caplog.records if r.name == "quire.http_guard"]
        assert len(dropped) == 1 and "injected" in dropped[0].getMessage() and not dropped[0].exc_info
        shutdown.set()
