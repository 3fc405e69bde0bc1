"""How this broker calls another broker's admin API: as itself, Pulsar's way.

Requests a broker sends to another (a partitioned-topic operation fanned out to the partitions'
owners, a namespace unload spread over the bundles' owners, the load manager's shedding)
authenticate with the broker's own credentials, Pulsar's ``brokerClientAuthenticationPlugin`` /
``brokerClientAuthenticationParameters`` (``broker_client_*`` here; see clients.auth's
``authentication_from`` for the names and formats), over HTTPS to the owner's ``httpUrlTls``
with ``broker_client_tls_enabled``. A forwarded request names its caller in
``X-Original-Principal``; the receiving broker accepts that header only from a superuser or a
``proxy_roles`` role and then authorizes the original principal
(``broker.authorization.Authorizer.acting_roles``), so a caller identified by a client
certificate, which cannot be forwarded, keeps its identity on the other broker.

Without a broker client plugin the caller's own ``Authorization`` header goes along instead
(what the brokers did before; a certificate identity is then lost on the other broker).
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any, Mapping

import httpx

from clients.auth import AuthenticationTLS, authentication_from, tls_context
from clients.errors import InvalidConfiguration
from quire.config import ConfigError

if TYPE_CHECKING:
    from broker.config import BrokerConfig

ORIGINAL_PRINCIPAL = "X-Original-Principal"


class BrokerClient:
    def __init__(self, config: "BrokerConfig") -> None:
        try:
            self.authentication = authentication_from(config.broker_client_authentication_plugin,
                                                      config.broker_client_authentication_parameters)
        except InvalidConfiguration as exc:
            raise ConfigError(f"broker_client_authentication_*: {exc}") from None
        self.tls_enabled = config.broker_client_tls_enabled
        self.trust_file = config.broker_client_trust_certs_file_path or config.tls_trust_certs_file_path
        self.allow_insecure = config.tls_allow_insecure_connection
        self.cert_file = config.broker_client_certificate_file_path
        self.key_file = config.broker_client_key_file_path
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError("broker_client_certificate_file_path and broker_client_key_file_path go together")
        self._context: ssl.SSLContext | None = None  # built once: that costs ~0.2 s

    def base_url(self, broker: Mapping[str, Any]) -> str:
        """The admin URL of another broker (its ownership or load-report data)."""
        tls = broker.get("httpUrlTls") or broker.get("webServiceUrlTls") if self.tls_enabled else None
        return str(tls or broker.get("httpUrl") or broker["webServiceUrl"]).rstrip("/")

    def http(self, timeout: float = 30) -> httpx.AsyncClient:
        """A client with this broker's credentials (the caller closes it: ``async with``)."""
        headers = self.authentication.http_headers() if self.authentication is not None else {}
        return httpx.AsyncClient(timeout=timeout, verify=self._tls() if self.tls_enabled else False, headers=headers)

    def forwarded_headers(self, principal: str | None, caller_authorization: str | None) -> dict[str, str]:
        """Headers of a caller's request passed on to another broker."""
        headers = {"content-type": "application/json"}
        if self.authentication is not None:
            if principal is not None:
                headers[ORIGINAL_PRINCIPAL] = principal
        elif caller_authorization:
            headers["authorization"] = caller_authorization
        return headers

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            # Broker ids are host:port, as for bookies: names are not checked (Pulsar's
            # tlsHostnameVerificationEnabled defaults to false too).
            auth = self.authentication
            if self.cert_file and not isinstance(auth, AuthenticationTLS):
                auth = AuthenticationTLS(self.cert_file, self.key_file)
            self._context = tls_context(trust_certs_file_path=self.trust_file or None,
                                        allow_insecure_connection=self.allow_insecure, authentication=auth)
        return self._context
