"""Unit tests of quire.security: tokens, htpasswd files, providers (no processes)."""

from __future__ import annotations

import base64
import time

import jwt
import pytest

from quire.security.errors import AuthenticationError, SecurityConfigError
from quire.security.htpasswd import PasswordFile, check_password, hash_password, md5_crypt
from quire.security.keys import read_value
from quire.security.providers import AuthenticationService, TlsProvider, provider_method
from quire.security.tokens import (
    TokenVerifier,
    create_key_pair,
    create_secret_key,
    create_token,
    parse_relative_time,
    show_token,
)


def test_hs256_round_trip_and_failures() -> None:
    key = create_secret_key()
    v = TokenVerifier(secret_key=key)
    token = create_token("alice", secret_key=key, expiry_seconds=3600)
    got = v.verify(token)
    assert got.role == "alice" and got.expires_at is not None
    assert v.verify("Bearer " + token).role == "alice"
    assert v.verify(create_token("bob", secret_key=key)).expires_at is None  # no exp: never expires
    with pytest.raises(AuthenticationError, match="signature"):
        v.verify(create_token("alice", secret_key=create_secret_key()))
    with pytest.raises(AuthenticationError, match="malformed"):
        v.verify("not-a-token")
    with pytest.raises(AuthenticationError, match="empty"):
        v.verify("")
    with pytest.raises(AuthenticationError, match="no sub claim"):
        v.verify(jwt.encode({"x": 1}, key, algorithm="HS256"))


def test_expiry_and_clock_skew() -> None:
    key = create_secret_key()
    token = create_token("alice", secret_key=key, expiry_seconds=10, now=1000)
    assert TokenVerifier(secret_key=key).verify(token, now=1005).role == "alice"
    with pytest.raises(AuthenticationError, match="expired"):
        TokenVerifier(secret_key=key).verify(token, now=1011)
    assert TokenVerifier(secret_key=key, clock_skew_seconds=5).verify(token, now=1014).role == "alice"
    with pytest.raises(AuthenticationError, match="expired"):
        TokenVerifier(secret_key=key, clock_skew_seconds=5).verify(token, now=1016)


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_key_pairs(alg: str) -> None:
    private, public = create_key_pair(alg)
    v = TokenVerifier(public_key=public, public_alg=alg)
    assert v.verify(create_token("svc", private_key=private, alg=alg)).role == "svc"
    other, _ = create_key_pair(alg)
    with pytest.raises(AuthenticationError, match="signature"):
        v.verify(create_token("svc", private_key=other, alg=alg))
    # Algorithm confusion: an HS256 token "signed" with the (public) key bytes is refused.
    forged = jwt.encode({"sub": "admin"}, base64.b64encode(public), algorithm="HS256")
    with pytest.raises(AuthenticationError, match="expected"):
        v.verify(forged)


def test_errors_never_contain_the_token() -> None:
    key = create_secret_key()
    token = create_token("alice", secret_key=key, expiry_seconds=-100)
    for bad in (token, token[:-3] + "abc", token + "x", "a.b.c"):
        with pytest.raises(AuthenticationError) as info:
            TokenVerifier(secret_key=key).verify(bad)
        assert bad not in str(info.value) and token.split(".")[2] not in str(info.value)


def test_show_and_relative_time() -> None:
    token = create_token("alice", secret_key=b"k" * 32, expiry_seconds=60)
    header, claims = show_token(token)
    assert header["alg"] == "HS256" and claims["sub"] == "alice"
    assert [parse_relative_time(t) for t in ("30s", "10m", "1h", "2d", "1w", "1y", "7")] == \
        [30, 600, 3600, 172800, 604800, 31536000, 7]
    with pytest.raises(ValueError):
        parse_relative_time("1 fortnight")


def test_key_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "k").write_bytes(b"\x01\x02")
    assert read_value(f"file://{tmp_path / 'k'}", "k") == b"\x01\x02"
    assert read_value(str(tmp_path / "k"), "k") == b"\x01\x02"
    assert read_value("data:;base64,AQI=", "k") == b"\x01\x02"
    assert read_value("AQI=", "k") == b"\x01\x02"
    with pytest.raises(SecurityConfigError, match="cannot read"):
        read_value("file:///nonexistent/key", "k")


def test_htpasswd_hashes() -> None:
    # The vector `openssl passwd -apr1 -salt abcdefgh secret` prints.
    assert md5_crypt(b"secret", b"abcdefgh") == b"$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"
    for scheme in ("bcrypt", "apr1"):
        h = hash_password("pw", scheme)
        assert check_password("pw", h) and not check_password("px", h)
    assert not check_password("pw", "pw")  # plain text is never accepted
    users = PasswordFile(f"# users\nalice:{hash_password('a1', 'apr1')}\nbob:{hash_password('b1')}\n")
    assert users.authenticate("alice", "a1") == "alice"
    assert users.authenticate("bob", "b1") == "bob"
    for user, pw in (("alice", "b1"), ("carol", "a1")):
        with pytest.raises(AuthenticationError, match="unknown user or wrong password"):
            users.authenticate(user, pw)
    with pytest.raises(SecurityConfigError, match="line 1"):
        PasswordFile("no-colon-here")


class _Conf:
    authentication_enabled = True
    authentication_providers = ["org.apache.pulsar.broker.authentication.AuthenticationProviderToken", "basic", "tls"]
    anonymous_user_role = ""
    token_secret_key = "data:;base64," + base64.b64encode(b"s" * 32).decode()
    token_public_key = ""
    token_allowed_clock_skew_seconds = 0
    basic_auth_conf = "data:;base64," + base64.b64encode(b"alice:" + hash_password("pw", "apr1").encode()).decode()


def test_service_picks_providers() -> None:
    svc = AuthenticationService.from_config(_Conf())
    assert set(svc.providers) == {"token", "basic", "tls"}
    token = create_token("bob", secret_key=b"s" * 32, expiry_seconds=60)
    p = svc.provider("token")
    assert p is not None and p.authenticate(token.encode(), None).role == "bob"
    b = svc.provider("basic")
    assert b is not None and b.authenticate(b"alice:pw", None).role == "alice"
    assert b.authenticate(b"alice:pw", None).role == "alice"  # cached
    with pytest.raises(AuthenticationError):
        b.authenticate(b"alice:nope", None)
    assert svc.http_credentials("Bearer " + token) == ("token", token.encode())
    assert svc.http_credentials("Basic " + base64.b64encode(b"alice:pw").decode()) == ("basic", b"alice:pw")
    with pytest.raises(AuthenticationError, match="required"):
        svc.anonymous()
    with pytest.raises(AuthenticationError, match="not enabled"):
        svc.provider("kerberos")
    cert = {"subject": ((("countryName", "XX"),), (("commonName", "client-role"),))}
    assert svc.anonymous(cert).role == "client-role"
    with pytest.raises(AuthenticationError):
        TlsProvider().authenticate(b"", None)
    assert provider_method("AuthenticationProviderBasic") == "basic"
    with pytest.raises(SecurityConfigError):
        provider_method("sasl")


def test_disabled_service_lets_everyone_in() -> None:
    class Off:
        authentication_enabled = False
    svc = AuthenticationService.from_config(Off())
    assert svc.anonymous().role is None and svc.provider("token") is None


def test_expired_result() -> None:
    from quire.security.providers import AuthResult
    assert AuthResult("r", "token", time.time() - 1).expired()
    assert not AuthResult("r", "token", None).expired()


def test_tls_provider_needs_a_trust_file() -> None:
    """Without tls_trust_certs_file_path no client certificate is asked for: a config error,
    not a tls provider that can never name a role."""
    from quire.security.tls import ServerTls

    class Conf:
        authentication_enabled = True
        authentication_providers = ["token", "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"]
        tls_certificate_file_path, tls_key_file_path, tls_trust_certs_file_path = "c.pem", "k.pem", ""
        tls_require_trusted_client_cert_on_connect = tls_allow_insecure_connection = False
        tls_cert_refresh_check_duration_sec = 300

    with pytest.raises(SecurityConfigError, match="tls_trust_certs_file_path"):
        ServerTls.from_config(Conf())
