"""Authentication providers and the service that picks one, on the binary protocol (CONNECT's
``auth_method_name`` / ``auth_data``, AUTH_RESPONSE) and on HTTP (``Authorization`` header,
client certificate). The method names are Pulsar's: ``token``, ``basic``, ``tls``; Pulsar's
provider class names in ``authentication_providers`` map to them.

Settings are read by attribute from any config object with the broker's snake_case keys
(``authentication_enabled``, ``authentication_providers``, ``token_secret_key``, ...), so this
package does not import the broker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from quire.security.errors import AuthenticationError, SecurityConfigError
from quire.security.htpasswd import PasswordFile
from quire.security.keys import read_value
from quire.security.tokens import TokenVerifier

PeerCert = Mapping[str, Any] | None  # ssl.SSLSocket.getpeercert() of a verified client


@dataclass(frozen=True)
class AuthResult:
    role: str | None  # None: authentication is off (everyone is let in without a role)
    method: str
    expires_at: float | None = None

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (time.time() if now is None else now) >= self.expires_at


class AuthenticationProvider(Protocol):
    method: str
    blocking: bool  # slow enough (bcrypt) to run off the event loop

    def authenticate(self, data: bytes, peer_cert: PeerCert) -> AuthResult: ...


class TokenProvider:
    method = "token"
    blocking = False

    def __init__(self, verifier: TokenVerifier) -> None:
        self.verifier = verifier

    def authenticate(self, data: bytes, peer_cert: PeerCert) -> AuthResult:
        try:
            token = data.decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationError("malformed token") from None
        v = self.verifier.verify(token)
        expires = v.expires_at + self.verifier.leeway if v.expires_at is not None else None
        return AuthResult(v.role, self.method, expires)


class BasicProvider:
    """``user:password`` (what the official client's AuthenticationBasic sends on CONNECT and,
    base64-encoded, in ``Authorization: Basic``). A verified pair is remembered by its SHA-256
    for a minute, so reconnecting clients do not pay bcrypt every time."""

    method = "basic"
    blocking = True
    _CACHE = 1024
    _CACHE_TTL = 60.0

    def __init__(self, passwords: PasswordFile) -> None:
        self.passwords = passwords
        self._ok: OrderedDict[bytes, float] = OrderedDict()

    def authenticate(self, data: bytes, peer_cert: PeerCert) -> AuthResult:
        user, sep, password = data.decode("utf-8", "replace").partition(":")
        if not sep or not user:
            raise AuthenticationError("basic credentials must be user:password")
        key = hashlib.sha256(data).digest()
        seen = self._ok.get(key)
        if seen is None or time.monotonic() - seen > self._CACHE_TTL:
            self.passwords.authenticate(user, password)
            self._ok[key] = time.monotonic()
            self._ok.move_to_end(key)
            while len(self._ok) > self._CACHE:
                self._ok.popitem(last=False)
        return AuthResult(user, self.method)


class TlsProvider:
    """The role is the CN of the client certificate the TLS handshake verified."""

    method = "tls"
    blocking = False

    def authenticate(self, data: bytes, peer_cert: PeerCert) -> AuthResult:
        if not peer_cert:
            raise AuthenticationError("no verified client certificate")
        cn = common_name(peer_cert)
        if not cn:
            raise AuthenticationError("the client certificate has no common name")
        return AuthResult(cn, self.method)


def common_name(peer_cert: Mapping[str, Any]) -> str | None:
    for rdn in peer_cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


_CLASS_NAMES = {"authenticationprovidertoken": "token", "authenticationproviderbasic": "basic",
                "authenticationprovidertls": "tls"}


def provider_method(name: str) -> str:
    """``token`` for ``token`` or ``org.apache.pulsar.broker.authentication.AuthenticationProviderToken``."""
    short = name.strip().rsplit(".", 1)[-1].lower()
    method = _CLASS_NAMES.get(short, short)
    if method not in ("token", "basic", "tls"):
        raise SecurityConfigError(f"unknown authentication provider {name!r} (token, basic, tls)")
    return method


def build_provider(method: str, config: Any) -> AuthenticationProvider:
    if method == "token":
        secret = getattr(config, "token_secret_key", "")
        public = getattr(config, "token_public_key", "")
        verifier = TokenVerifier(
            secret_key=read_value(secret, "token_secret_key") if secret else None,
            public_key=read_value(public, "token_public_key") if public else None,
            public_alg=getattr(config, "token_public_alg", "RS256"),
            claim=getattr(config, "token_auth_claim", "") or "sub",
            clock_skew_seconds=getattr(config, "token_allowed_clock_skew_seconds", 0),
            audience_claim=getattr(config, "token_audience_claim", ""),
            audience=getattr(config, "token_audience", ""))
        return TokenProvider(verifier)
    if method == "basic":
        conf = getattr(config, "basic_auth_conf", "")
        if not conf:
            raise SecurityConfigError("the basic provider needs basic_auth_conf (an htpasswd file)")
        return BasicProvider(PasswordFile(read_value(conf, "basic_auth_conf").decode("utf-8", "replace")))
    return TlsProvider()


class AuthenticationService:
    """The configured providers; answers "which role is this?" for a connection or a request."""

    def __init__(self, enabled: bool, providers: list[AuthenticationProvider], anonymous_role: str = "") -> None:
        self.enabled = enabled
        self.providers = {p.method: p for p in providers}
        self.anonymous_role = anonymous_role or None

    @classmethod
    def from_config(cls, config: Any) -> "AuthenticationService":
        enabled = bool(getattr(config, "authentication_enabled", False))
        names = list(getattr(config, "authentication_providers", []) or [])
        if enabled and not names:
            raise SecurityConfigError("authentication_enabled needs authentication_providers (token, basic, tls)")
        providers = [build_provider(provider_method(n), config) for n in names] if enabled else []
        return cls(enabled, providers, getattr(config, "anonymous_user_role", ""))

    def provider(self, method: str) -> AuthenticationProvider | None:
        """The provider for a method name; None = no credentials (anonymous or disabled)."""
        if not self.enabled:
            return None
        if method in ("", "none"):
            return None
        p = self.providers.get(method)
        if p is None:
            raise AuthenticationError(f"authentication method {method!s:.40} is not enabled on this broker")
        return p

    def anonymous(self, peer_cert: PeerCert = None) -> AuthResult:
        """No credentials: a verified client certificate, the anonymous role, or a refusal."""
        if not self.enabled:
            return AuthResult(None, "none")
        tls = self.providers.get("tls")
        if tls is not None and peer_cert:
            return tls.authenticate(b"", peer_cert)
        if self.anonymous_role:
            return AuthResult(self.anonymous_role, "anonymous")
        raise AuthenticationError("authentication required")

    def http_credentials(self, authorization: str | None) -> tuple[str, bytes]:
        """(method, data) of an ``Authorization`` header (``Bearer`` token or ``Basic``)."""
        if not authorization:
            return "none", b""
        scheme, _, value = authorization.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            return "token", value.strip().encode()
        if scheme == "basic":
            try:
                return "basic", base64.b64decode(value.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise AuthenticationError("malformed basic credentials") from None
        raise AuthenticationError(f"unsupported authorization scheme {scheme:.20}")
