"""Client authentication plugins with the official ``pulsar`` package's names:
``AuthenticationToken(token or a function returning one)``, ``AuthenticationBasic(user,
password)``, ``AuthenticationTLS(certificate_path, private_key_path)``. Each gives the method
name and data CONNECT carries; a token function is called again for every AUTH_CHALLENGE, so
a long-lived connection can present a fresh token when the old one expires.

Over HTTP (the admin API) the same objects give ``http_headers()``: ``Authorization: Bearer`` or
``Basic``; a TLS identity travels in the handshake instead. ``authentication_from(plugin,
params)`` is Pulsar's ``AuthenticationFactory.create(authPluginClassName, authParams)`` with its
class names and parameter strings (broker_client_* keys, the Spark connector's options)."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Callable

from .errors import InvalidConfiguration


class Authentication:
    method = "none"

    def auth_data(self) -> bytes:
        return b""

    def http_headers(self) -> dict[str, str]:
        """The credentials as HTTP headers (the admin API's ``Authorization``)."""
        return {}

    def __repr__(self) -> str:  # never the secret itself
        return f"{type(self).__name__}(method={self.method!r})"


class AuthenticationToken(Authentication):
    method = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_data(self) -> bytes:
        token = self._token() if callable(self._token) else self._token
        return token.strip().encode()

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer " + self.auth_data().decode()}


class AuthenticationBasic(Authentication):
    def __init__(self, username: str, password: str, method: str = "basic") -> None:
        self.method = method
        self._data = f"{username}:{password}".encode()

    def auth_data(self) -> bytes:
        return self._data

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(self._data).decode()}


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


class TokenFile:
    """A token read from its file at each use, so a rotated file is picked up (Pulsar's
    ``file:`` token parameter); a plain object, so it pickles (Spark ships options to executors)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> str:
        return Path(self.path).read_text()


# Pulsar's client plugin class names (and short names) -> ours
_PLUGINS = {"authenticationtoken": "token", "token": "token", "authenticationtls": "tls", "tls": "tls",
            "authenticationbasic": "basic", "basic": "basic", "authenticationdisabled": "", "": ""}


def _param_map(params: str) -> dict[str, str]:
    """``{"k": "v"}`` JSON or Pulsar's ``k1:v1,k2:v2`` string."""
    text = params.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:  # its msg only: the text may hold a password
            raise InvalidConfiguration(f"authentication parameters are not valid JSON: {exc.msg}") from None
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    out = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = pair.partition(":")
        if not sep:
            raise InvalidConfiguration(f"authentication parameter {key[:40]!r} has no value (key:value)")
        out[key.strip()] = value.strip()
    return out


def authentication_from(plugin: str, params: str) -> Authentication | None:
    """Pulsar's ``AuthenticationFactory.create``: ``AuthenticationToken`` with ``token:<jwt>``,
    ``file:///path`` (read at each use) or the token itself; ``AuthenticationTls`` with
    ``tlsCertFile:<path>,tlsKeyFile:<path>`` (or JSON); ``AuthenticationBasic`` with
    ``{"userId": .., "password": ..}``. Class names may be given in full
    (``org.apache.pulsar.client.impl.auth.AuthenticationToken``) or short (``token``, ``tls``,
    ``basic``). None for no plugin (or ``AuthenticationDisabled``); InvalidConfiguration for a
    plugin or parameters that cannot be used (the message never holds a secret)."""
    kind = _PLUGINS.get(plugin.strip().rsplit(".", 1)[-1].lower())
    if kind is None:
        raise InvalidConfiguration(f"unknown authentication plugin {plugin[:120]!r} "
                                   "(AuthenticationToken, AuthenticationTls, AuthenticationBasic)")
    params = params.strip()
    if kind == "":
        return None
    if kind == "token":
        if params.startswith("{"):
            params = _param_map(params).get("token", "")
        if params.startswith("file:"):
            path = params[len("file:"):]
            path = path[2:] if path.startswith("//") else path
            if not Path(path).is_file():
                raise InvalidConfiguration(f"the token file {path[:200]} does not exist")
            return AuthenticationToken(TokenFile(path))
        token = params[len("token:"):] if params.startswith("token:") else params
        if not token.strip():
            raise InvalidConfiguration("AuthenticationToken needs a token (token:<jwt> or file:///path)")
        return AuthenticationToken(token.strip())
    values = _param_map(params)
    if kind == "tls":
        cert, key = values.get("tlsCertFile", ""), values.get("tlsKeyFile", "")
        if not cert or not key:
            raise InvalidConfiguration("AuthenticationTls needs tlsCertFile:<path>,tlsKeyFile:<path>")
        return AuthenticationTLS(cert, key)
    user, password = values.get("userId", ""), values.get("password", "")
    if not user:
        raise InvalidConfiguration('AuthenticationBasic needs {"userId": ..., "password": ...}')
    return AuthenticationBasic(user, password)
