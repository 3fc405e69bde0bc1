"""The identity a bookie requires of its clients (brokers, other bookies): with
``bookie_auth_provider_factory_class = "token"`` the first request on every connection must be
AUTH carrying a JWT that the bookie's key verifies (and whose role is allowed); anything else
first is answered UNAUTHORIZED and the connection closed. Pure decisions, no sockets."""

from __future__ import annotations

from typing import Any

from bookie.errors import BookieError


class BookieAuthConfigError(BookieError, ValueError):
    """The configured provider or key cannot be used."""


class BookieAuthenticator:
    def __init__(self, config: Any) -> None:
        from quire.security.errors import SecurityConfigError
        from quire.security.keys import read_value
        from quire.security.tokens import TokenVerifier

        provider = config.bookie_auth_provider_factory_class
        if provider != "token":
            raise BookieAuthConfigError(f"unknown bookie_auth_provider_factory_class {provider!r} (\"\" or \"token\")")
        try:
            secret, public = config.bookie_auth_token_secret_key, config.bookie_auth_token_public_key
            self.verifier = TokenVerifier(
                secret_key=read_value(secret, "bookie_auth_token_secret_key") if secret else None,
                public_key=read_value(public, "bookie_auth_token_public_key") if public else None,
                public_alg=config.bookie_auth_token_public_alg)
        except SecurityConfigError as exc:
            raise BookieAuthConfigError(str(exc)) from None
        self.roles = set(config.bookie_auth_allowed_roles or [])

    def role(self, token: bytes) -> str | None:
        """The role of a valid, allowed token; None otherwise (the reason is not the peer's business)."""
        from quire.security.errors import AuthenticationError
        try:
            role = self.verifier.verify(token.decode("ascii")).role
        except (AuthenticationError, UnicodeDecodeError):
            return None
        return role if not self.roles or role in self.roles else None


def authenticator(config: Any) -> BookieAuthenticator | None:
    return BookieAuthenticator(config) if config.bookie_auth_provider_factory_class else None
