"""HTTPS for our hypercorn servers (broker admin, bookie HTTP API): a hypercorn ``Config`` that
serves a :class:`ServerTls` context (reloaded when its files change), and the ASGI TLS extension
that hypercorn 0.18 does not implement.

The ASGI TLS extension (asgiref's "TLS Extension" spec) puts the peer's certificate in each
request's ``scope["extensions"]["tls"]``: ``client_cert_chain`` (PEM strings, leaf first),
``client_cert_name`` (the RFC 4514 subject), ``client_cert_error``, ``tls_version``,
``cipher_suite``, ``server_cert``. hypercorn's trio ``TCPServer`` does the handshake and passes
nothing of it on, so :func:`install_tls_scope` adds an app hook to quire.http_guard's guarded
connection (the one ``worker_serve`` builds per connection) that wraps that connection's app and
adds the extension (idempotent; every hypercorn server of the process gets it, plain HTTP
connections unchanged).
Only a certificate the handshake verified is reported (``getpeercert()`` is empty for none or
for one the context did not verify), so a role taken from it is one the trust file vouches for.
"""

from __future__ import annotations

import ssl
from typing import Any, Callable

import trio
from hypercorn.config import Config

from quire.http_guard import guard_connections
from quire.security.tls import ServerTls

_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


class TlsConfig(Config):
    """hypercorn's Config whose SSL context is a ServerTls's (the same object across reloads)."""

    tls: ServerTls | None = None

    @property
    def ssl_enabled(self) -> bool:
        return self.tls is not None

    def create_ssl_context(self) -> Any:
        return self.tls.context if self.tls is not None else None


def tls_extension(stream: Any) -> dict[str, Any]:
    """The ASGI ``tls`` extension of one finished handshake (a ``trio.SSLStream``)."""
    verified = stream.getpeercert() or {}
    der = stream.getpeercert(binary_form=True) if verified else None
    subject = ",".join(f"{k}={v}" for rdn in reversed(verified.get("subject", ())) for k, v in rdn) or None
    return {"server_cert": None, "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
            "client_cert_name": subject, "client_cert_error": None,
            "tls_version": _TLS_VERSIONS.get(stream.version() or ""), "cipher_suite": None,
            "quire_peer_cert": verified or None}  # getpeercert()'s dict, what our TLS provider reads


class _WithTlsScope:
    """One connection's app wrapper (hypercorn's AppWrapper protocol) adding the extension."""

    def __init__(self, app: Any, stream: Any) -> None:
        self.app, self.stream = app, stream
        self._ext: dict[str, Any] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any, sync_spawn: Callable[..., Any],
                       call_soon: Callable[..., Any]) -> None:
        if scope.get("type") in ("http", "websocket"):
            if self._ext is None:  # the handshake is done once a request exists
                self._ext = tls_extension(self.stream)
            scope.setdefault("extensions", {})["tls"] = self._ext
        await self.app(scope, receive, send, sync_spawn, call_soon)


def _tls_scope_hook(app: Any, stream: Any) -> Any:
    # Its handshake runs later, inside the guarded connection: the extension is read on the first request.
    return _WithTlsScope(app, stream) if isinstance(stream, trio.SSLStream) else app


def install_tls_scope() -> None:
    """Make hypercorn's trio server add the ASGI TLS extension on TLS connections (idempotent)."""
    guard_connections(_tls_scope_hook)


def peer_cert(scope: Any) -> dict[str, Any] | None:
    """The verified client certificate of a request (``getpeercert()``'s dict), or None."""
    tls = (scope.get("extensions") or {}).get("tls")
    return tls.get("quire_peer_cert") if isinstance(tls, dict) else None
