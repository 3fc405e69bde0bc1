"""JWT tokens as ``pulsar tokens`` makes them and ``AuthenticationProviderToken`` checks them.

A token is signed with a secret key (HS256; the key file holds the raw bytes) or with the
private half of a key pair (RS256 or ES256; DER or PEM); the broker holds the secret key or the
public key. The role is the ``sub`` claim (``token_auth_claim``); ``exp``, when present, is
enforced with ``token_allowed_clock_skew_seconds`` of slack. Error messages say what is wrong
with a token, never what the token is.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from quire.security.errors import AuthenticationError, SecurityConfigError
from quire.security.keys import load_private_key, load_public_key

SECRET_ALGS = ("HS256", "HS384", "HS512")
KEY_PAIR_ALGS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_relative_time(text: str) -> int:
    """Seconds in ``30s`` / ``10m`` / ``1h`` / ``2d`` / ``1w`` / ``1y`` (Pulsar's RelativeTimeUtil); a bare number = seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhdwy]?)\s*", text.lower())
    if not m:
        raise ValueError(f"not a relative time: {text!r} (use e.g. 30s, 10m, 1h, 2d, 1w, 1y)")
    return int(m.group(1)) * _UNITS[m.group(2) or "s"]


def create_secret_key() -> bytes:
    """A fresh HS256 key: 32 random bytes (what ``pulsar tokens create-secret-key`` writes)."""
    return secrets.token_bytes(32)


def create_key_pair(alg: str = "RS256") -> tuple[bytes, bytes]:
    """(private PKCS#8 DER, public X.509 DER) for ``alg`` (RS* = RSA 2048, ES256 = P-256 ...)."""
    if alg.startswith("RS"):
        private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif alg in ("ES256", "ES384", "ES512"):
        curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}[alg]
        private = ec.generate_private_key(curve)
    else:
        raise SecurityConfigError(f"unsupported key pair algorithm {alg} (one of {', '.join(KEY_PAIR_ALGS)})")
    der_private = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    der_public = private.public_key().public_bytes(serialization.Encoding.DER,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return der_private, der_public


def create_token(subject: str, *, secret_key: bytes | None = None, private_key: bytes | None = None,
                 alg: str | None = None, expiry_seconds: int | None = None, claim: str = "sub",
                 headers: dict[str, Any] | None = None, now: float | None = None) -> str:
    """A signed token whose ``claim`` is ``subject`` (the role); ``exp`` only with an expiry."""
    payload: dict[str, Any] = {claim: subject}
    if expiry_seconds is not None:
        payload["exp"] = int((time.time() if now is None else now) + expiry_seconds)
    if secret_key is not None:
        alg = alg or "HS256"
        if alg not in SECRET_ALGS:
            raise SecurityConfigError(f"a secret key signs with {', '.join(SECRET_ALGS)}, not {alg}")
        return jwt.encode(payload, secret_key, algorithm=alg, headers=headers)
    if private_key is not None:
        key = load_private_key(private_key)
        alg = alg or ("ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256")
        if alg not in KEY_PAIR_ALGS:
            raise SecurityConfigError(f"a private key signs with {', '.join(KEY_PAIR_ALGS)}, not {alg}")
        return jwt.encode(payload, key, algorithm=alg, headers=headers)
    raise SecurityConfigError("a token needs a secret key or a private key")


def show_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) of a token without checking its signature (``pulsar tokens show``)."""
    try:
        return jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise AuthenticationError("malformed token") from None


@dataclass(frozen=True)
class VerifiedToken:
    role: str
    expires_at: float | None  # epoch seconds, None = never
    claims: dict[str, Any]


class TokenVerifier:
    """Checks tokens against the broker's secret key or public key."""

    def __init__(self, *, secret_key: bytes | None = None, public_key: bytes | None = None,
                 public_alg: str = "RS256", claim: str = "sub", clock_skew_seconds: int = 0,
                 audience_claim: str = "", audience: str = "") -> None:
        if (secret_key is None) == (public_key is None):
            raise SecurityConfigError("token authentication needs exactly one of token_secret_key, token_public_key")
        if secret_key is not None:
            self._key: Any = secret_key
            self._algs = list(SECRET_ALGS)
        else:
            assert public_key is not None
            self._key = load_public_key(public_key, "token_public_key")
            if public_alg not in KEY_PAIR_ALGS:
                raise SecurityConfigError(f"token_public_alg must be one of {', '.join(KEY_PAIR_ALGS)}, not {public_alg}")
            self._algs = [public_alg]  # never HS*: the public key is no secret
        self.claim = claim
        self.leeway = max(0, clock_skew_seconds)
        self.audience_claim = audience_claim
        self.audience = audience

    def verify(self, token: str, *, now: float | None = None) -> VerifiedToken:
        token = token.strip()
        if token.lower().startswith("bearer "):
            token = token[7:].strip()
        if not token:
            raise AuthenticationError("empty token")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError("malformed token") from None
        if header.get("alg") not in self._algs:
            raise AuthenticationError(f"token signed with {header.get('alg')!s:.20}, expected {'/'.join(self._algs)}")
        try:
            claims = jwt.decode(token, self._key, algorithms=self._algs, leeway=self.leeway,
                                options={"verify_aud": False, "verify_exp": False, "verify_iat": False,
                                         "verify_nbf": False})
        except jwt.InvalidSignatureError:
            raise AuthenticationError("token signature verification failed") from None
        except jwt.PyJWTError:
            raise AuthenticationError("malformed token") from None
        t = time.time() if now is None else now
        exp = claims.get("exp")
        if exp is not None:
            if not isinstance(exp, (int, float)) or isinstance(exp, bool):
                raise AuthenticationError("token exp claim is not a number")
            if t > exp + self.leeway:
                raise AuthenticationError("token expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and t + self.leeway < nbf:
            raise AuthenticationError("token not valid yet")
        if self.audience_claim:
            aud = claims.get(self.audience_claim)
            auds = aud if isinstance(aud, list) else [aud]
            if self.audience not in auds:
                raise AuthenticationError("token audience does not match this broker")
        role = claims.get(self.claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationError(f"token has no {self.claim} claim naming a role")
        return VerifiedToken(role, float(exp) if exp is not None else None, claims)
