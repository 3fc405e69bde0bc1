"""clients.auth.authentication_from: Pulsar's plugin class names and parameter strings (the
broker's broker_client_* keys, the Spark connector's options), and the HTTP headers of each."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import pytest

from clients.auth import AuthenticationBasic, AuthenticationTLS, AuthenticationToken, authentication_from
from clients.errors import InvalidConfiguration


def test_plugins_and_parameters(tmp_path: Path) -> None:
    token_file = tmp_path / "token.txt"
    token_file.write_text("jwt-from-file\n")
    full = "org.apache.pulsar.client.impl.auth."
    for plugin, params in ((full + "AuthenticationToken", "token:abc"), ("token", "abc"),
                           ("AuthenticationToken", '{"token": "abc"}')):
        auth = authentication_from(plugin, params)
        assert isinstance(auth, AuthenticationToken) and auth.http_headers() == {"Authorization": "Bearer abc"}
    auth = authentication_from("token", f"file://{token_file}")
    assert auth is not None and auth.http_headers() == {"Authorization": "Bearer jwt-from-file"}
    token_file.write_text("rotated")  # read at each use
    assert auth.http_headers() == {"Authorization": "Bearer rotated"}
    assert pickle.loads(pickle.dumps(auth)).auth_data() == b"rotated"  # Spark ships it to executors
    tls = authentication_from(full + "AuthenticationTls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem")
    assert isinstance(tls, AuthenticationTLS) and (tls.certificate_path, tls.private_key_path) == ("/c.pem", "/k.pem")
    assert tls.http_headers() == {}  # the certificate travels in the handshake
    basic = authentication_from("basic", '{"userId": "u", "password": "p:w"}')
    assert isinstance(basic, AuthenticationBasic)
    assert basic.http_headers() == {"Authorization": "Basic " + base64.b64encode(b"u:p:w").decode()}
    assert authentication_from("", "") is None
    assert authentication_from(full + "AuthenticationDisabled", "") is None


@pytest.mark.parametrize("plugin, params, words", [
    ("com.example.Kerberos", "", "unknown authentication plugin"),
    ("token", "", "needs a token"),
    ("token", "file:///nonexistent/token", "does not exist"),
    ("tls", "tlsCertFile:/c.pem", "tlsKeyFile"),
    ("basic", "{not json", "not valid JSON"),
    ("basic", "password:secret-pw", "userId"),
])
def test_bad_plugins_and_parameters(plugin: str, params: str, words: str) -> None:
    with pytest.raises(InvalidConfiguration, match=words) as info:
        authentication_from(plugin, params)
    assert "secret-pw" not in str(info.value)
