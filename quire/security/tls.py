"""Server-side TLS with Pulsar's settings: ``tls_certificate_file_path``, ``tls_key_file_path``,
``tls_trust_certs_file_path`` (the CA that client certificates must chain to),
``tls_require_trusted_client_cert_on_connect``, ``tls_allow_insecure_connection`` (accept an
untrusted client certificate) and ``tls_cert_refresh_check_duration_sec``: the files are
checked that often and, when one changed, loaded into the same context, so new handshakes use
the new certificate and open connections keep theirs. A half-written pair (the certificate
replaced, the key not yet) fails to load and the old one stays until the next check."""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

import trio

from quire.security.errors import SecurityConfigError

log = logging.getLogger(__name__)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class ServerTls:
    """One server SSLContext that follows its files."""

    def __init__(self, cert_file: str, key_file: str, trust_file: str = "", *,
                 require_client_cert: bool = False, allow_insecure: bool = False,
                 refresh_seconds: float = 300, alpn: list[str] | None = None) -> None:
        if not cert_file or not key_file:
            raise SecurityConfigError("TLS needs tls_certificate_file_path and tls_key_file_path")
        self.files = [f for f in (cert_file, key_file, trust_file) if f]
        self.cert_file, self.key_file, self.trust_file = cert_file, key_file, trust_file
        self.refresh_seconds = refresh_seconds
        self.reloads = 0
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if alpn:
            ctx.set_alpn_protocols(alpn)
        if trust_file and not allow_insecure:
            # A client certificate, when sent, must chain to the trust file (its CN is a role).
            ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
        elif require_client_cert and not allow_insecure:
            raise SecurityConfigError("tls_require_trusted_client_cert_on_connect needs tls_trust_certs_file_path")
        self.context = ctx
        self._stamps = [_stamp(f) for f in self.files]
        self._load()

    def _load(self) -> None:
        try:
            self.context.load_cert_chain(self.cert_file, self.key_file)
            if self.trust_file:
                self.context.load_verify_locations(self.trust_file)
        except (OSError, ssl.SSLError) as exc:
            raise SecurityConfigError(f"cannot load TLS certificate {self.cert_file} / key {self.key_file}: "
                                      f"{getattr(exc, 'strerror', None) or exc}") from None

    def maybe_reload(self) -> bool:
        """Reload when a file changed since the last load; True if it did."""
        stamps = [_stamp(f) for f in self.files]
        if stamps == self._stamps:
            return False
        try:
            self._load()
        except SecurityConfigError as exc:
            log.warning("TLS files changed but do not load yet (%s); keeping the previous certificate", exc)
            return False
        self._stamps = stamps
        self.reloads += 1
        log.info("reloaded the TLS certificate %s", self.cert_file)
        return True

    async def watch(self) -> None:
        """Check the files every ``refresh_seconds`` (Pulsar's tlsCertRefreshCheckDurationSec)."""
        if self.refresh_seconds <= 0:
            return
        while True:
            await trio.sleep(self.refresh_seconds)
            self.maybe_reload()

    @classmethod
    def from_config(cls, config: Any, alpn: list[str] | None = None) -> "ServerTls":
        from quire.security.providers import provider_method

        methods = ({provider_method(n) for n in getattr(config, "authentication_providers", None) or []}
                   if getattr(config, "authentication_enabled", False) else set())
        if "tls" in methods and not config.tls_trust_certs_file_path:
            # Without a trust file no client certificate is asked for, so none could name a role.
            raise SecurityConfigError("the tls authentication provider needs tls_trust_certs_file_path "
                                      "(the CA that client certificates chain to)")
        return cls(config.tls_certificate_file_path, config.tls_key_file_path, config.tls_trust_certs_file_path,
                   require_client_cert=config.tls_require_trusted_client_cert_on_connect,
                   allow_insecure=config.tls_allow_insecure_connection,
                   refresh_seconds=config.tls_cert_refresh_check_duration_sec, alpn=alpn)
