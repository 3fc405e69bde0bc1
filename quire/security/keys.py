"""Key and file values as Pulsar writes them in its config: ``data:;base64,<b64>``,
``file:///path`` (or a plain path), or the base64 text itself. Pulsar's ``tokens`` tool writes
keys as raw bytes (secret) or DER (PKCS#8 private, X.509 public); PEM is accepted too."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from quire.security.errors import SecurityConfigError


def read_value(value: str, what: str) -> bytes:
    """The bytes a ``data:``/``file:``/path/base64 config value names."""
    value = value.strip()
    if value.startswith("data:"):
        _, _, payload = value.partition(",")
        try:
            return base64.b64decode(payload, validate=True) if ";base64" in value.split(",", 1)[0] else payload.encode()
        except binascii.Error:
            raise SecurityConfigError(f"{what}: the data: value is not valid base64") from None
    if value.startswith("file:"):
        path = value[len("file://"):] if value.startswith("file://") else value[len("file:"):]
        return _read_file(path, what)
    if value.startswith(("/", ".")) or Path(value).is_file():
        return _read_file(value, what)
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise SecurityConfigError(f"{what}: expected data:;base64,..., file:///path or base64 text") from None


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SecurityConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None


def load_private_key(data: bytes, what: str = "private key") -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SecurityConfigError(f"{what}: not a PEM or DER private key") from None


def load_public_key(data: bytes, what: str = "public key") -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError):
        raise SecurityConfigError(f"{what}: not a PEM or DER public key") from None
