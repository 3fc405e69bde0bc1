"""Basic authentication against an htpasswd-style file (``user:hash`` lines), as Pulsar's
``AuthenticationProviderBasic`` reads ``basicAuthConf``. Hashes: bcrypt (``$2y$``/``$2b$``/
``$2a$``, what ``htpasswd -B`` writes), Apache MD5 (``$apr1$``, ``htpasswd -m``, Pulsar's
documented choice), and SHA-crypt (``$5$``/``$6$``) where the platform's crypt(3) has it.
Verification is slow on purpose (bcrypt): callers run it off the event loop."""

from __future__ import annotations

import hashlib
import hmac
import warnings
from typing import Callable

import bcrypt

from quire.security.errors import AuthenticationError, SecurityConfigError

_ITOA64 = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _to64(value: int, n: int) -> bytes:
    out = bytearray()
    for _ in range(n):
        out.append(_ITOA64[value & 0x3F])
        value >>= 6
    return bytes(out)


def md5_crypt(password: bytes, salt: bytes, magic: bytes = b"$apr1$") -> bytes:
    """Poul-Henning Kamp's MD5-crypt with Apache's ``$apr1$`` magic (``htpasswd -m``)."""
    salt = salt[:8]
    alt = hashlib.md5(password + salt + password).digest()
    ctx = password + magic + salt
    for left in range(len(password), 0, -16):
        ctx += alt[:min(16, left)]
    i = len(password)
    while i:
        ctx += b"\0" if i & 1 else password[:1]
        i >>= 1
    final = hashlib.md5(ctx).digest()
    for i in range(1000):
        c = password if i & 1 else final
        if i % 3:
            c += salt
        if i % 7:
            c += password
        c += final if i & 1 else password
        final = hashlib.md5(c).digest()
    f = final
    out = b"".join(_to64((f[a] << 16) | (f[b] << 8) | f[c], 4)
                   for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)))
    return magic + salt + b"$" + out + _to64(f[11], 2)


def _system_crypt() -> Callable[[str, str], str | None] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt  # noqa: PLC0415 (deprecated module, absent from Python 3.13)
        return crypt.crypt
    except ImportError:
        return None


def check_password(password: str, hashed: str) -> bool:
    pw, h = password.encode(), hashed.encode()
    if h.startswith((b"$2y$", b"$2b$", b"$2a$")):
        try:
            return bcrypt.checkpw(pw, b"$2b$" + h[4:])
        except ValueError:
            return False
    if h.startswith(b"$apr1$") or h.startswith(b"$1$"):
        magic = b"$apr1$" if h.startswith(b"$apr1$") else b"$1$"
        salt = h[len(magic):].split(b"$", 1)[0]
        return hmac.compare_digest(md5_crypt(pw, salt, magic), h)
    if h.startswith((b"$5$", b"$6$")):
        crypt = _system_crypt()
        if crypt is None:
            raise SecurityConfigError("SHA-crypt hashes need crypt(3); use bcrypt (htpasswd -B) instead")
        computed = crypt(password, hashed)
        return computed is not None and hmac.compare_digest(computed.encode(), h)
    return False  # plain text and DES crypt are refused


def hash_password(password: str, scheme: str = "bcrypt") -> str:
    """A hash for an htpasswd line (tests and tools): ``bcrypt`` or ``apr1``."""
    if scheme == "bcrypt":
        return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode().replace("$2b$", "$2y$", 1)
    if scheme == "apr1":
        import secrets
        salt = bytes(_ITOA64[b % 64] for b in secrets.token_bytes(8))
        return md5_crypt(password.encode(), salt).decode()
    raise ValueError(f"unknown scheme {scheme}")


class PasswordFile:
    """The users of one htpasswd file (loaded once; a broker restart re-reads it)."""

    def __init__(self, text: str) -> None:
        self.users: dict[str, str] = {}
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, hashed = line.partition(":")
            if not sep or not user or not hashed:
                raise SecurityConfigError(f"basic_auth_conf line {n}: expected user:hash")
            self.users[user] = hashed

    def authenticate(self, user: str, password: str) -> str:
        """The role (the user name) for a right password; AuthenticationError otherwise."""
        hashed = self.users.get(user)
        if hashed is None:
            check_password(password, _DUMMY)  # the same time for unknown users
            raise AuthenticationError("unknown user or wrong password")
        if not check_password(password, hashed):
            raise AuthenticationError("unknown user or wrong password")
        return user


_DUMMY = "$2y$10$" + "." * 53
