"""``quire tokens``: make and inspect JWT tokens like ``pulsar tokens``.

``create-secret-key`` (32 random bytes; ``--output`` writes them raw, else base64 is printed),
``create-key-pair`` (DER files; RS256 or ES256), ``create --subject ROLE [--expiry-time 1h]``
signed with ``--secret-key`` or ``--private-key`` (``file:///path``, ``data:;base64,...``,
a path or base64 text), ``show`` (header and claims, unverified) and ``validate`` (checks
the signature and expiry with ``--secret-key`` or ``--public-key``; exit 1 if invalid).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import click

from quire.security.errors import AuthenticationError
from quire.security.keys import read_value
from quire.security.tokens import (
    KEY_PAIR_ALGS,
    TokenVerifier,
    create_key_pair,
    create_secret_key,
    create_token,
    parse_relative_time,
    show_token,
)


@click.group()
def tokens() -> None:
    """Create and check JWT tokens (pulsar tokens)."""


def _write_private(path: str, data: bytes) -> None:
    p = Path(path)
    p.touch(mode=0o600, exist_ok=True)
    p.chmod(0o600)
    p.write_bytes(data)


@tokens.command("create-secret-key")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the raw key bytes to this file")
@click.option("-b", "--base64", "as_base64", is_flag=True, help="print base64 (the default without --output)")
def create_secret_key_cmd(output: str | None, as_base64: bool) -> None:
    """A new HS256 secret key."""
    key = create_secret_key()
    if output:
        _write_private(output, base64.b64encode(key) if as_base64 else key)
    else:
        click.echo(base64.b64encode(key).decode())


@tokens.command("create-key-pair")
@click.option("--output-private-key", required=True, type=click.Path(dir_okay=False))
@click.option("--output-public-key", required=True, type=click.Path(dir_okay=False))
@click.option("-a", "--signature-algorithm", default="RS256", show_default=True,
              type=click.Choice(list(KEY_PAIR_ALGS)))
def create_key_pair_cmd(output_private_key: str, output_public_key: str, signature_algorithm: str) -> None:
    """A new private/public key pair (DER), for RS256 or ES256 tokens."""
    private, public = create_key_pair(signature_algorithm)
    _write_private(output_private_key, private)
    Path(output_public_key).write_bytes(public)


def _token_input(token: str | None, token_file: str | None, stdin: bool) -> str:
    if token:
        return token
    if token_file:
        return read_value(token_file if "://" in token_file or token_file.startswith("data:") else
                          f"file://{Path(token_file).resolve()}", "token file").decode().strip()
    if stdin:
        return sys.stdin.read().strip()
    raise click.UsageError("give the token with -i TOKEN, -f FILE or --stdin")


_token_options = [
    click.option("-i", "--token", help="the token"),
    click.option("-f", "--token-file", help="a file holding the token"),
    click.option("--stdin", is_flag=True, help="read the token from standard input"),
]


def _with_token(fn):
    for opt in reversed(_token_options):
        fn = opt(fn)
    return fn


@tokens.command("create")
@click.option("-s", "--subject", required=True, help="the role this token grants")
@click.option("-e", "--expiry-time", help="relative expiry (30s, 10m, 1h, 2d, 1w, 1y); default: never")
@click.option("-sk", "--secret-key", help="HS256 secret key (file:///path, data:;base64,..., path or base64)")
@click.option("-pk", "--private-key", help="RS256/ES256 private key (file:///path, data:;base64,..., path)")
@click.option("-a", "--signature-algorithm", help="HS256 with a secret key; RS256/ES256 with a private key")
@click.option("--claim", default="sub", show_default=True, help="the claim holding the role (token_auth_claim)")
def create_cmd(subject: str, expiry_time: str | None, secret_key: str | None, private_key: str | None,
               signature_algorithm: str | None, claim: str) -> None:
    """A token for SUBJECT, signed with a secret key or a private key."""
    if (secret_key is None) == (private_key is None):
        raise click.UsageError("give exactly one of --secret-key, --private-key")
    expiry = None
    if expiry_time:
        try:
            expiry = parse_relative_time(expiry_time)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--expiry-time") from None
    token = create_token(subject,
                         secret_key=read_value(secret_key, "--secret-key") if secret_key else None,
                         private_key=read_value(private_key, "--private-key") if private_key else None,
                         alg=signature_algorithm, expiry_seconds=expiry, claim=claim)
    click.echo(token)


@tokens.command("show")
@_with_token
def show_cmd(token: str | None, token_file: str | None, stdin: bool) -> None:
    """Print a token's header and claims (the signature is not checked)."""
    header, claims = show_token(_token_input(token, token_file, stdin))
    click.echo(json.dumps(header, sort_keys=True))
    click.echo(json.dumps(claims, sort_keys=True))


@tokens.command("validate")
@_with_token
@click.option("-sk", "--secret-key", help="the HS256 secret key")
@click.option("-pk", "--public-key", help="the RS256/ES256 public key")
@click.option("-a", "--signature-algorithm", default="RS256", show_default=True, help="with --public-key")
@click.option("--claim", default="sub", show_default=True)
def validate_cmd(token: str | None, token_file: str | None, stdin: bool, secret_key: str | None,
                 public_key: str | None, signature_algorithm: str, claim: str) -> None:
    """Check a token's signature and expiry; print its claims (exit 1 when invalid)."""
    if (secret_key is None) == (public_key is None):
        raise click.UsageError("give exactly one of --secret-key, --public-key")
    verifier = TokenVerifier(secret_key=read_value(secret_key, "--secret-key") if secret_key else None,
                             public_key=read_value(public_key, "--public-key") if public_key else None,
                             public_alg=signature_algorithm, claim=claim)
    try:
        v = verifier.verify(_token_input(token, token_file, stdin))
    except AuthenticationError as exc:
        raise click.ClickException(f"invalid token: {exc}") from None
    click.echo(json.dumps(v.claims, sort_keys=True))
