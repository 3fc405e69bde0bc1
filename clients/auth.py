"""Client authentication plugins with the official ``pulsar`` package's names:
``AuthenticationToken(token or a function returning one)``, ``AuthenticationBasic(user,
password)``, ``AuthenticationTLS(certificate_path, private_key_path)``. Each gives the method
name and data CONNECT carries; a token function is called again for every AUTH_CHALLENGE, so
a long-lived connection can present a fresh token when the old one expires."""

from __future__ import annotations

import ssl
from typing import Callable


class Authentication:
    method = "none"

    def auth_data(self) -> bytes:
        return b""

    def __repr__(self) -> str:  # never the secret itself
        return f"{type(self).__name__}(method={self.method!r})"


class AuthenticationToken(Authentication):
    method = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_data(self) -> bytes:
        token = self._token() if callable(self._token) else self._token
        return token.strip().encode()


class AuthenticationBasic(Authentication):
    def __init__(self, username: str, password: str, method: str = "basic") -> None:
        self.method = method
        self._data = f"{username}:{password}".encode()

    def auth_data(self) -> bytes:
        return self._data


class AuthenticationTLS(Authentication):
    """The role is the CN of this client certificate (presented in the TLS handshake)."""

    method = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self.certificate_path = certificate_path
        self.private_key_path = private_key_path


def tls_context(*, trust_certs_file_path: str | None = None, allow_insecure_connection: bool = False,
                validate_hostname: bool = False, authentication: Authentication | None = None) -> ssl.SSLContext:
    """The client side of ``pulsar+ssl://``, with the official client's option names: the
    broker's certificate must chain to the trust file (the system's CAs without one) unless
    ``allow_insecure_connection``; its name must match the host with ``validate_hostname``;
    ``AuthenticationTLS`` adds the client certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=trust_certs_file_path or None)
    ctx.check_hostname = bool(validate_hostname) and not allow_insecure_connection
    if allow_insecure_connection:
        ctx.verify_mode = ssl.CERT_NONE
    if isinstance(authentication, AuthenticationTLS):
        ctx.load_cert_chain(authentication.certificate_path, authentication.private_key_path)
    return ctx
