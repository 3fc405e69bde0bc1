"""What ``quire cluster-status`` shows, read from the metadata store (and the bookies' HTTP).

* brokers: ``/loadbalance/brokers/<host:port>`` (each broker's ephemeral node) with whatever
  its data holds: URLs, start time and, once brokers publish load reports there, their load;
* bookies: ``/ledgers/available/<id>`` (writable) and ``/ledgers/available/readonly/<id>``,
  with free/total disk from each bookie's ``/api/v1/bookie/info`` (null when it does not answer);
* bundle owners: ``/namespace/<tenant>/<ns>/<bundle>`` (Pulsar's ownership nodes);
* under-replicated ledgers: the ledger nodes under ``/ledgers/underreplication/ledgers`` (the
  auditor's marks, laid out as ledger metadata paths), with the replicas each misses; empty when
  nothing is under-replicated or no auditor runs.

Pure reads: safe against a live cluster, and the same code serves the admin route
``/admin/v2/quire/cluster-status`` and ``quire cluster-status --metadata-url``.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from bookie.client.config import ClientConfig
from bookie.http_client import bookie_http, bookie_http_url
from metadata import values
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore

log = logging.getLogger(__name__)

BROKERS = "/loadbalance/brokers"
BOOKIES = "/ledgers/available"
READONLY = "/ledgers/available/readonly"
NAMESPACES = "/namespace"
UNDER_REPLICATED = "/ledgers/underreplication/ledgers"
MAX_UNDER_REPLICATED = 10_000  # listed; a count past this is "at least"


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(await store.children(path))
    except NotFoundError:
        return []


async def _data(store: MetadataStore, path: str) -> Any:
    try:
        raw, _ = await store.get(path)
    except NotFoundError:
        return None
    if not raw:
        return {}
    try:
        return values.unpack(raw)
    except MetadataError:
        try:
            import json

            return json.loads(raw)
        except ValueError:
            return {"raw": raw[:64].hex()}


def _plain(value: Any) -> Any:
    """msgpack values made JSON-serialisable (bytes as hex)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


async def _bookie_disk(bookie_id: str, info: dict[str, Any], ledger_client: ClientConfig | None) -> dict[str, Any] | None:
    port = info.get("http_port") if isinstance(info, dict) else None
    if not port:
        return None
    host = bookie_id.rsplit(":", 1)[0]
    import httpx

    try:
        async with bookie_http(ledger_client, timeout=2) as http:
            resp = await http.get(bookie_http_url(host, port, info) + "/api/v1/bookie/info")
        body = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    free, total = body.get("freeSpace"), body.get("totalSpace")
    if not isinstance(free, int) or not isinstance(total, int) or total <= 0:
        return None
    return {"freeBytes": free, "totalBytes": total, "usedPercent": round(100 * (total - free) / total, 1)}


async def _bookies(store: MetadataStore, ledger_client: ClientConfig | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for read_only, base in ((False, BOOKIES), (True, READONLY)):
        for bid in await _children(store, base):
            if not read_only and bid == "readonly":
                continue
            info = _plain(await _data(store, f"{base}/{bid}")) or {}
            rows.append({"id": bid, "state": "read-only" if read_only else "writable", "info": info, "disk": None})

    async def disk(row: dict[str, Any]) -> None:
        row["disk"] = await _bookie_disk(row["id"], row["info"], ledger_client)

    async with trio.open_nursery() as nursery:
        for row in rows:
            nursery.start_soon(disk, row)
    return rows


async def _bundle_owners(store: MetadataStore) -> list[dict[str, Any]]:
    rows = []
    for tenant in await _children(store, NAMESPACES):
        for ns in await _children(store, f"{NAMESPACES}/{tenant}"):
            for bundle in await _children(store, f"{NAMESPACES}/{tenant}/{ns}"):
                owner = _plain(await _data(store, f"{NAMESPACES}/{tenant}/{ns}/{bundle}")) or {}
                rows.append({"namespace": f"{tenant}/{ns}", "bundle": bundle,
                             "owner": owner.get("httpUrl") or owner.get("nativeUrl") or owner,
                             "disabled": bool(owner.get("disabled", False))})
    return rows


async def _under_replicated(store: MetadataStore) -> list[dict[str, Any]]:
    """Marked ledgers, ascending, with the replicas they miss (the auditor's value)."""
    from metadata.ledger_ids import iter_ledger_ids, ledger_path

    found: list[dict[str, Any]] = []
    try:
        async for lid in iter_ledger_ids(store, root=UNDER_REPLICATED):
            value = _plain(await _data(store, ledger_path(lid, UNDER_REPLICATED)))
            missing = value.get("missing_replicas", []) if isinstance(value, dict) else []
            found.append({"ledger": lid, "missingReplicas": missing})
            if len(found) >= MAX_UNDER_REPLICATED:
                break
    except NotFoundError:
        pass
    return found


async def collect(store: MetadataStore, ledger_client: ClientConfig | None = None) -> dict[str, Any]:
    """The cluster as the metadata store describes it (see the module docstring). The bookies'
    HTTP API is asked like the ledger client asks their port (``ledger_client``: its TLS trust
    and token), over HTTPS when a bookie registered ``http_tls``."""
    brokers = [{"id": b, "data": _plain(await _data(store, f"{BROKERS}/{b}")) or {}}
               for b in await _children(store, BROKERS)]
    return {
        "brokers": brokers,
        "bookies": await _bookies(store, ledger_client),
        "bundles": await _bundle_owners(store),
        "underReplicatedLedgers": await _under_replicated(store),
    }


def render(status: dict[str, Any]) -> str:
    """The status as a few readable tables (``quire cluster-status`` without ``--json``)."""
    lines = [f"brokers ({len(status['brokers'])}):"]
    for b in status["brokers"]:
        data = b.get("data") or {}
        load = {k: v for k, v in data.items() if k not in ("pulsarServiceUrl", "webServiceUrl", "brokerVersionString",
                                                           "startTimestamp", "pulsarServiceUrlTls", "webServiceUrlTls")}
        extra = "  " + ", ".join(f"{k}={_short(v)}" for k, v in sorted(load.items())) if load else "  (no load report)"
        lines.append(f"  {b['id']:<24} {data.get('pulsarServiceUrl', '')}{extra}")
    writable = sum(1 for b in status["bookies"] if b["state"] == "writable")
    lines.append(f"bookies ({len(status['bookies'])}, {writable} writable):")
    for b in status["bookies"]:
        d = b.get("disk")
        disk = (f"disk {d['usedPercent']}% used, {d['freeBytes'] / 2**30:.1f} GiB free of {d['totalBytes'] / 2**30:.1f} GiB"
                if d else "disk: unknown (HTTP not reachable)")
        lines.append(f"  {b['id']:<24} {b['state']:<10} {disk}")
    lines.append(f"bundles owned ({len(status['bundles'])}):")
    for r in status["bundles"]:
        flag = " (unloading)" if r["disabled"] else ""
        lines.append(f"  {r['namespace']}/{r['bundle']:<24} {r['owner']}{flag}")
    ur = status["underReplicatedLedgers"]
    lines.append(f"under-replicated ledgers ({len(ur)}){':' if ur else ': none'}")
    for row in ur[:50]:
        lines.append(f"  ledger {row['ledger']:<12} missing replicas on {', '.join(row['missingReplicas']) or '?'}")
    if len(ur) > 50:
        lines.append(f"  ... {len(ur) - 50} more (--json lists them all)")
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (dict, list)):
        text = str(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(value)
