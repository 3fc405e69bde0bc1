"""The security package's exceptions. Each carries the Pulsar ``ServerError`` name the binary
protocol answers with and the HTTP status the admin API answers with. Messages never contain
the credential itself (tokens, passwords): they end up in logs and on the wire."""

from __future__ import annotations


class SecurityError(Exception):
    server_error = "UnknownError"
    http_status = 500


class SecurityConfigError(SecurityError, ValueError):
    """A key, password file or certificate named in the config cannot be used."""


class AuthenticationError(SecurityError):
    """No credentials where they are required, or credentials that do not prove a role."""

    server_error = "AuthenticationError"
    http_status = 401


class AuthorizationError(SecurityError):
    """An authenticated role that may not do what it asked."""

    server_error = "AuthorizationError"
    http_status = 403
