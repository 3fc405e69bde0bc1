"""A blocking HTTP session with the brokers' admin REST API, shared by ``quire admin`` and the
Spark connector: the credentials of a ``clients.Authentication`` (``Authorization`` header, or the
client certificate of ``AuthenticationTLS``), the TLS trust options of the official client, and
the brokers' 307 to a topic's owner followed here rather than by httpx.

httpx drops ``Authorization`` on a redirect to another port (a new origin), and Python's urllib
does not follow a 307 on POST at all; the owner broker of the same cluster needs the caller's
credentials as much as the first one did (Pulsar's admin client re-sends them too). An
https -> http redirect is refused: no credentials in clear."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx

from .auth import Authentication, AuthenticationTLS, tls_context

MAX_REDIRECTS = 5


class AdminRedirectError(httpx.HTTPError):
    """A redirect this session will not follow (https -> http, or too many)."""


@functools.cache
def _default_verify() -> ssl.SSLContext:
    """httpx's default verification context, built once per process: loading the CA bundle
    costs 30-170 ms per ``httpx.Client`` otherwise (the Spark connector opens one per query)."""
    return httpx.create_ssl_context()


class AdminHttp:
    def __init__(self, url: str, *, authentication: Authentication | None = None,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False,
                 tls_validate_hostname: bool = True, timeout: float = 30.0) -> None:
        verify: Any = None
        if tls_allow_insecure_connection or tls_trust_certs_file_path or isinstance(authentication, AuthenticationTLS):
            verify = tls_context(trust_certs_file_path=tls_trust_certs_file_path,
                                 allow_insecure_connection=tls_allow_insecure_connection,
                                 validate_hostname=tls_validate_hostname, authentication=authentication)
        self.authentication = authentication
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, verify=verify or _default_verify())

    def headers(self) -> dict[str, str]:
        # asked per request: a token read from a file follows the file
        return self.authentication.http_headers() if self.authentication is not None else {}

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call (``kwargs``: httpx's ``json``, ``content``, ``params``), following 307/308
        with the same method, body and credentials."""
        resp = self.http.request(method, path, headers=self.headers(), **kwargs)
        for _ in range(MAX_REDIRECTS):
            if resp.status_code not in (307, 308) or "location" not in resp.headers:
                return resp
            target = resp.url.join(resp.headers["location"])
            if resp.url.scheme == "https" and target.scheme != "https":
                raise AdminRedirectError(f"refusing a redirect from https to {target}")
            resp = self.http.request(method, target, headers=self.headers(), **kwargs)
        raise AdminRedirectError(f"more than {MAX_REDIRECTS} redirects")

    def close(self) -> None:
        self.http.close()
