"""Exceptions of the Spark connector (one hierarchy)."""

from __future__ import annotations


class PulsarConnectorError(Exception):
    """Base of every error the connector raises."""


class PulsarOptionError(PulsarConnectorError, ValueError):
    """A missing, unknown or contradictory option; the message names the option."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"pulsar option '{option}': {problem}")
        self.option = option


class PulsarAdminError(PulsarConnectorError):
    """The admin REST API answered with an error."""

    def __init__(self, status: int, path: str, body: str) -> None:
        super().__init__(f"admin {path}: HTTP {status} {body[:300]}")
        self.status = status


class PulsarDataLossError(PulsarConnectorError):
    """Offsets the query still needs were already deleted by retention (failOnDataLoss=true)."""
