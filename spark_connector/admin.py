"""A minimal blocking client of the broker's admin REST API (``/admin/v2``), for planning on the driver.

Only what the connector needs: partition counts, namespace topic lists, internal stats (ledgers,
last confirmed entry), durable subscriptions created/reset to a position, topic stats.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from .errors import PulsarAdminError

PARTITION_SUFFIX = "-partition-"


def full_topic_name(topic: str) -> str:
    """``t`` -> ``persistent://public/default/t``; ``tenant/ns/t`` -> ``persistent://tenant/ns/t``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"invalid topic name {topic!r}")


def _rest_path(topic: str) -> str:
    domain, rest = full_topic_name(topic).split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"/admin/v2/{domain}/{tenant}/{ns}/{quote(local, safe='')}"


class AdminClient:
    def __init__(self, admin_url: str, timeout_s: float = 30.0) -> None:
        self.base = admin_url.rstrip("/")
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            raise PulsarAdminError(exc.code, path, exc.read().decode(errors="replace")) from None
        return json.loads(raw) if raw.strip() else None

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
