"""Token refresh on a long-lived connection (issue 18): once a connection's token expires the
broker sends AUTH_CHALLENGE (every ``authentication_refresh_check_seconds``, 1 s here); a
client whose token supplier hands out a fresh token keeps its connection and its producer; a
client that can only repeat the expired token is disconnected and cannot come back."""

from __future__ import annotations

import time

import pulsar
import pytest

import clients
from tests.security.conftest import SecureNode

LIFETIME = 2  # seconds each issued token lives


def supplier(sn: SecureNode, role: str, issued: list[str]):  # type: ignore[no-untyped-def]
    def fresh() -> str:
        token = sn.token(role, expiry_seconds=LIFETIME)
        issued.append(token)
        return token
    return fresh


@pytest.mark.parametrize("lib", ["quire", "official"])
def test_fresh_tokens_keep_the_connection(secure: SecureNode, lib: str) -> None:
    issued: list[str] = []
    topic = f"persistent://acme/ns/refresh-{lib}"
    if lib == "official":
        client = pulsar.Client(secure.node.url, authentication=pulsar.AuthenticationToken(supplier(secure, "granted", issued)),
                               operation_timeout_seconds=10,
                               logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"))
    else:
        client = clients.Client(secure.node.url, authentication=clients.AuthenticationToken(
            supplier(secure, "granted", issued)), operation_timeout_seconds=10)
    log_before = len(secure.node.proc.log_text())
    try:
        producer = client.create_producer(topic)
        producer.send(b"before expiry")
        deadline = time.monotonic() + 20
        # wait until the broker challenged (the supplier was asked again) at least twice
        while len(issued) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(issued) >= 3, issued
        producer.send(b"after two refreshes")
        producer.close()
    finally:
        client.close()
    log = secure.node.proc.log_text()[log_before:]
    assert "refreshed credentials refused" not in log and "were not refreshed" not in log, log[-2000:]
    assert "failed authentication" not in log


def test_an_expired_token_that_is_not_refreshed_ends_the_connection(secure: SecureNode) -> None:
    token = secure.token("granted", expiry_seconds=LIFETIME)
    client = clients.Client(secure.node.url, authentication=clients.AuthenticationToken(token),
                            operation_timeout_seconds=3)
    log_before = len(secure.node.proc.log_text())
    try:
        producer = client.create_producer("persistent://acme/ns/refresh-static", send_timeout_millis=3000)
        producer.send(b"while valid")
        time.sleep(LIFETIME + 2.5)
        with pytest.raises(clients.PulsarException):
            producer.send(b"after expiry")  # the broker closed the connection; reconnecting is refused
    finally:
        client.close()
    log = secure.node.proc.log_text()[log_before:]
    assert "refreshed credentials refused: token expired" in log
    assert token not in log
