"""``quire admin``: a small client of the broker's admin REST API (``/admin/v2``, Pulsar's paths).

Mirrors the common ``pulsar-admin`` verbs: tenants, namespaces (+ retention, TTL, dedup),
topics (create, partitions, stats, internal stats, subscriptions, unload, delete). Output is the
broker's JSON, pretty-printed.
"""

from __future__ import annotations

import json
from typing import Any

import click
import httpx

from quire.cli_errors import NOT_LISTENING


class AdminClient:
    """Thin synchronous wrapper over the REST endpoints (raises ``click.ClickException``)."""

    def __init__(self, url: str, auth_token: str | None = None, auth_basic: str | None = None,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False) -> None:
        self._url = url.rstrip("/")
        headers = {}
        if auth_token:
            headers["Authorization"] = f"Bearer {auth_token.strip()}"
        elif auth_basic:
            import base64
            headers["Authorization"] = "Basic " + base64.b64encode(auth_basic.encode()).decode()
        verify: Any = True
        if tls_allow_insecure_connection:
            verify = False
        elif tls_trust_certs_file_path:
            import ssl
            verify = ssl.create_default_context(cafile=tls_trust_certs_file_path)
        self._http = httpx.Client(base_url=self._url, timeout=30, headers=headers, verify=verify)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.ConnectError:
            where = f"{self._http.base_url.host}:{self._http.base_url.port}"
            raise click.ClickException(
                f"cannot connect to {where} (admin URL {self._url}): {NOT_LISTENING}") from None
        except httpx.HTTPError as exc:
            raise click.ClickException(f"{method} {path}: {exc}") from None
        if resp.status_code >= 400:
            raise click.ClickException(f"{method} {path}: HTTP {resp.status_code}: {_reason(resp)}")
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            return resp.text


def _reason(resp: httpx.Response) -> str:
    """The JSON ``reason`` of an admin error (Pulsar's shape), else the body's first line."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason"):
        return str(body["reason"])
    text = resp.text.strip()
    return text.splitlines()[0] if text else resp.reason_phrase


def topic_path(topic: str) -> str:
    """``persistent://t/ns/x`` or ``t/ns/x`` -> ``persistent/t/ns/x``."""
    if "://" in topic:
        domain, rest = topic.split("://", 1)
    else:
        domain, rest = "persistent", topic
    if "/" not in rest:
        rest = f"public/default/{rest}"  # a short name, as everywhere else
    if len(rest.split("/")) != 3:
        raise click.BadParameter(f"topic {topic!r} must be tenant/namespace/name")
    return f"{domain}/{rest}"


def _out(value: Any) -> None:
    if value is not None:
        click.echo(json.dumps(value, indent=2, sort_keys=True) if not isinstance(value, str) else value)


@click.group()
@click.option("--admin-url", default="http://localhost:8080", envvar="QUIRE_ADMIN_URL", show_default=True)
@click.option("--auth-token", envvar="QUIRE_AUTH_TOKEN", help="JWT token (sent as Authorization: Bearer)")
@click.option("--auth-basic", envvar="QUIRE_AUTH_BASIC", help="user:password (sent as Authorization: Basic)")
@click.option("--tls-trust-certs-file-path", help="CA file that the https:// admin URL's certificate chains to")
@click.option("--tls-allow-insecure-connection", is_flag=True, help="do not verify the https:// certificate")
@click.pass_context
def admin(ctx: click.Context, admin_url: str, auth_token: str | None, auth_basic: str | None,
          tls_trust_certs_file_path: str | None, tls_allow_insecure_connection: bool) -> None:
    """Administer tenants, namespaces and topics over the admin REST API."""
    ctx.obj = AdminClient(admin_url, auth_token, auth_basic, tls_trust_certs_file_path, tls_allow_insecure_connection)


# -- tenants -----------------------------------------------------------------------------------


@admin.group()
def tenants() -> None:
    """List, create and delete tenants."""


@tenants.command("list")
@click.pass_obj
def tenants_list(api: AdminClient) -> None:
    _out(api.call("GET", "/admin/v2/tenants"))


@tenants.command("create")
@click.argument("tenant")
@click.option("--clusters", default="standalone", show_default=True, help="comma-separated allowed clusters")
@click.pass_obj
def tenants_create(api: AdminClient, tenant: str, clusters: str) -> None:
    api.call("PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": clusters.split(","), "adminRoles": []})


@tenants.command("delete")
@click.argument("tenant")
@click.pass_obj
def tenants_delete(api: AdminClient, tenant: str) -> None:
    api.call("DELETE", f"/admin/v2/tenants/{tenant}")


# -- namespaces ------------------------------------------------------------------------------


@admin.group()
def namespaces() -> None:
    """Namespaces and their policies (retention, TTL, deduplication)."""


@namespaces.command("list")
@click.argument("tenant")
@click.pass_obj
def namespaces_list(api: AdminClient, tenant: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{tenant}"))


@namespaces.command("create")
@click.argument("namespace")
@click.pass_obj
def namespaces_create(api: AdminClient, namespace: str) -> None:
    api.call("PUT", f"/admin/v2/namespaces/{namespace}")


@namespaces.command("delete")
@click.argument("namespace")
@click.pass_obj
def namespaces_delete(api: AdminClient, namespace: str) -> None:
    api.call("DELETE", f"/admin/v2/namespaces/{namespace}")


@namespaces.command("policies")
@click.argument("namespace")
@click.pass_obj
def namespaces_policies(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}"))


@namespaces.command("topics")
@click.argument("namespace")
@click.pass_obj
def namespaces_topics(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}/topics"))


@namespaces.command("set-retention")
@click.argument("namespace")
@click.option("--size", "size_mb", type=int, required=True, help="retention size in MB (-1: infinite)")
@click.option("--time", "time_min", type=int, required=True, help="retention time in minutes (-1: infinite)")
@click.pass_obj
def namespaces_set_retention(api: AdminClient, namespace: str, size_mb: int, time_min: int) -> None:
    api.call("POST", f"/admin/v2/namespaces/{namespace}/retention",
             {"retentionSizeInMB": size_mb, "retentionTimeInMinutes": time_min})


@namespaces.command("get-retention")
@click.argument("namespace")
@click.pass_obj
def namespaces_get_retention(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}/retention"))


@namespaces.command("set-message-ttl")
@click.argument("namespace")
@click.option("--ttl", "ttl_s", type=int, required=True, help="message TTL in seconds")
@click.pass_obj
def namespaces_set_ttl(api: AdminClient, namespace: str, ttl_s: int) -> None:
    api.call("POST", f"/admin/v2/namespaces/{namespace}/messageTTL", ttl_s)


@namespaces.command("set-deduplication")
@click.argument("namespace")
@click.option("--enable/--disable", required=True)
@click.pass_obj
def namespaces_set_dedup(api: AdminClient, namespace: str, enable: bool) -> None:
    api.call("POST", f"/admin/v2/namespaces/{namespace}/deduplication", enable)


@namespaces.command("unload")
@click.argument("namespace")
@click.pass_obj
def namespaces_unload(api: AdminClient, namespace: str) -> None:
    api.call("PUT", f"/admin/v2/namespaces/{namespace}/unload")


# -- topics -------------------------------------------------------------------------------------


@admin.group()
def topics() -> None:
    """Topics: create, partitions, stats, subscriptions, unload, delete."""


@topics.command("list")
@click.argument("namespace")
@click.pass_obj
def topics_list(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/persistent/{namespace}"))


@topics.command("create")
@click.argument("topic")
@click.pass_obj
def topics_create(api: AdminClient, topic: str) -> None:
    api.call("PUT", f"/admin/v2/{topic_path(topic)}")


@topics.command("create-partitioned-topic")
@click.argument("topic")
@click.option("-p", "--partitions", type=int, required=True)
@click.pass_obj
def topics_create_partitioned(api: AdminClient, topic: str, partitions: int) -> None:
    api.call("PUT", f"/admin/v2/{topic_path(topic)}/partitions", partitions)


@topics.command("update-partitioned-topic")
@click.argument("topic")
@click.option("-p", "--partitions", type=int, required=True)
@click.pass_obj
def topics_update_partitioned(api: AdminClient, topic: str, partitions: int) -> None:
    api.call("POST", f"/admin/v2/{topic_path(topic)}/partitions", partitions)


@topics.command("get-partitioned-topic-metadata")
@click.argument("topic")
@click.pass_obj
def topics_partition_metadata(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/partitions"))


@topics.command("delete")
@click.argument("topic")
@click.option("--partitioned", is_flag=True, help="delete a partitioned topic and its partitions")
@click.pass_obj
def topics_delete(api: AdminClient, topic: str, partitioned: bool) -> None:
    suffix = "/partitions" if partitioned else ""
    api.call("DELETE", f"/admin/v2/{topic_path(topic)}{suffix}")


@topics.command("stats")
@click.argument("topic")
@click.pass_obj
def topics_stats(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/stats"))


@topics.command("partitioned-stats")
@click.argument("topic")
@click.pass_obj
def topics_partitioned_stats(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/partitioned-stats"))


@topics.command("stats-internal")
@click.argument("topic")
@click.pass_obj
def topics_internal_stats(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/internalStats"))


@topics.command("subscriptions")
@click.argument("topic")
@click.pass_obj
def topics_subscriptions(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/subscriptions"))


@topics.command("create-subscription")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.pass_obj
def topics_create_subscription(api: AdminClient, topic: str, subscription: str) -> None:
    api.call("PUT", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}")


@topics.command("unsubscribe")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.pass_obj
def topics_unsubscribe(api: AdminClient, topic: str, subscription: str) -> None:
    api.call("DELETE", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}")


@topics.command("skip-all")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.pass_obj
def topics_skip_all(api: AdminClient, topic: str, subscription: str) -> None:
    api.call("POST", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}/skip_all")


@topics.command("reset-cursor")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.option("-t", "--timestamp", type=int, required=True, help="publish time in ms since the epoch")
@click.pass_obj
def topics_reset_cursor(api: AdminClient, topic: str, subscription: str, timestamp: int) -> None:
    api.call("POST", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}/resetcursor/{timestamp}")


@topics.command("unload")
@click.argument("topic")
@click.pass_obj
def topics_unload(api: AdminClient, topic: str) -> None:
    api.call("PUT", f"/admin/v2/{topic_path(topic)}/unload")


@topics.command("last-message-id")
@click.argument("topic")
@click.pass_obj
def topics_last_message_id(api: AdminClient, topic: str) -> None:
    _out(api.call("GET", f"/admin/v2/{topic_path(topic)}/lastMessageId"))
