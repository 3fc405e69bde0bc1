"""A minimal blocking client of the broker's admin REST API (``/admin/v2``), for planning on the driver.

Only what the connector needs: partition counts, namespace topic lists, internal stats (ledgers,
last confirmed entry), durable subscriptions created/reset to a position, topic stats. The HTTP
side is clients.admin_http's, as for ``quire admin``: the credentials of the connector's
``pulsar.client.authPluginClassName`` / ``authParams`` on every call, its TLS trust options, and
a broker's 307 to a topic's owner followed with the credentials re-sent (on POST too).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from clients.admin_http import AdminHttp

from .errors import PulsarAdminError
from .topic_names import PARTITION_SUFFIX, full_topic_name

if TYPE_CHECKING:
    from clients.auth import Authentication

    from .options import PulsarOptions

def _rest_path(topic: str) -> str:
    domain, rest = full_topic_name(topic).split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"/admin/v2/{domain}/{tenant}/{ns}/{quote(local, safe='')}"


class AdminClient:
    def __init__(self, admin_url: str, timeout_s: float = 30.0, *, authentication: "Authentication | None" = None,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False) -> None:
        self.base = admin_url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = AdminHttp(self.base, authentication=authentication, timeout=timeout_s,
                               tls_trust_certs_file_path=tls_trust_certs_file_path,
                               tls_allow_insecure_connection=tls_allow_insecure_connection)

    @classmethod
    def for_options(cls, opts: "PulsarOptions") -> "AdminClient":
        """The admin client of a query: ``admin.url`` with the ``pulsar.client.*`` credentials and TLS trust."""
        conf = opts.client_conf
        return cls(opts.admin_url or "", authentication=conf.get("authentication"),
                   tls_trust_certs_file_path=conf.get("tls_trust_certs_file_path"),
                   tls_allow_insecure_connection=bool(conf.get("tls_allow_insecure_connection")))

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise PulsarAdminError(0, path, f"{type(exc).__name__}: {exc} (admin.url {self.base})") from None
        if missing_ok and resp.status_code == 404:
            return None
        if resp.status_code >= 300:
            raise PulsarAdminError(resp.status_code, path, resp.text)
        return json.loads(resp.content) if resp.content.strip() else None

    def partitions(self, topic: str) -> int:
        return int(self._call("GET", _rest_path(topic) + "/partitions")["partitions"])

    def namespace_topics(self, namespace: str) -> list[str]:
        return list(self._call("GET", f"/admin/v2/namespaces/{namespace}/topics"))

    def internal_stats(self, topic: str) -> dict[str, Any]:
        return self._call("GET", _rest_path(topic) + "/internalStats")

    def stats(self, topic: str) -> dict[str, Any]:
        return self._call("GET", _rest_path(topic) + "/stats")

    def schema(self, topic: str) -> dict[str, Any] | None:
        """The topic's latest schema (``{"type": "AVRO", "data": ...}``), None when it has none."""
        _, rest = full_topic_name(topic).split("://", 1)
        tenant, ns, local = rest.split("/", 2)
        if PARTITION_SUFFIX in local:  # partitions share their topic's schema
            local = local.rsplit(PARTITION_SUFFIX, 1)[0]
        return self._call("GET", f"/admin/v2/schemas/{tenant}/{ns}/{quote(local, safe='')}/schema", missing_ok=True)

    def subscriptions(self, topic: str) -> list[str]:
        return list(self._call("GET", _rest_path(topic) + "/subscriptions"))

    def create_subscription(self, topic: str, sub: str, ledger_id: int, entry_id: int) -> None:
        try:
            self._call("PUT", _rest_path(topic) + f"/subscription/{quote(sub, safe='')}",
                       {"ledgerId": ledger_id, "entryId": entry_id})
        except PulsarAdminError as exc:
            if exc.status != 409:  # exists already: fine
                raise

    def reset_cursor(self, topic: str, sub: str, ledger_id: int, entry_id: int) -> None:
        """The next message the subscription delivers is (ledger_id, entry_id): everything before
        it is acknowledged, so retention may delete it."""
        self._call("POST", _rest_path(topic) + f"/subscription/{quote(sub, safe='')}/resetcursor",
                   {"ledgerId": ledger_id, "entryId": entry_id})

    def delete_subscription(self, topic: str, sub: str) -> None:
        self._call("DELETE", _rest_path(topic) + f"/subscription/{quote(sub, safe='')}?force=true",
                   missing_ok=True)

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        self._call("POST", f"/admin/v2/namespaces/{namespace}/deduplication", enabled)
