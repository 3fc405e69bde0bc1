"""Calling a bookie's HTTP API (:mod:`bookie.http`) the way the ledger client calls its port:
over HTTPS with the ledger client's TLS trust (``tls_trust_store``, its own certificate) when
the bookie registered ``http_tls``, and with its token as ``Authorization: Bearer`` when it
presents one (a bookie with ``bookie_auth_provider_factory_class`` wants it there too)."""

from __future__ import annotations

from typing import Any

import httpx

from bookie.client.config import ClientConfig


def bookie_http_url(host: str, port: int, info: dict[str, Any]) -> str:
    """The base URL of a bookie's HTTP API from its registration data (``http_tls``)."""
    return f"{'https' if info.get('http_tls') else 'http'}://{host}:{port}"


def bookie_http(client: ClientConfig | None, timeout: float = 10) -> httpx.AsyncClient:
    verify: Any = True
    headers: dict[str, str] = {}
    if client is not None:
        ctx = client.tls_context()
        if ctx is not None:
            verify = ctx
        token = client.auth_token()
        if token:
            headers["Authorization"] = f"Bearer {token.decode('ascii', 'replace')}"
    return httpx.AsyncClient(timeout=timeout, verify=verify, headers=headers)
