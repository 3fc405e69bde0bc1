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

from clients.admin_http import AdminHttp, AdminRedirectError
from clients.auth import Authentication, AuthenticationBasic, AuthenticationToken
from quire.cli_errors import NOT_LISTENING


class AdminClient:
    """Thin synchronous wrapper over the REST endpoints (raises ``click.ClickException``); the
    HTTP side (credentials, TLS trust, the 307 to a topic's owner) is clients.admin_http's."""

    def __init__(self, url: str, auth_token: str | None = None, auth_basic: str | None = None,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False) -> None:
        self._url = url.rstrip("/")
        auth: Authentication | None = None
        if auth_token:
            auth = AuthenticationToken(auth_token.strip())
        elif auth_basic:
            user, _, password = auth_basic.partition(":")
            auth = AuthenticationBasic(user, password)
        self._session = AdminHttp(self._url, authentication=auth, tls_trust_certs_file_path=tls_trust_certs_file_path,
                                  tls_allow_insecure_connection=tls_allow_insecure_connection)
        self._http = self._session.http

    def _request(self, method: str, path: str, body: Any) -> httpx.Response:
        try:
            return self._session.request(method, path, json=body)
        except AdminRedirectError as exc:
            raise click.ClickException(f"{method} {path}: {exc}") from None

    def call(self, method: str, path: str, body: Any = None, *, raw: bool = False) -> Any:
        try:
            resp = self._request(method, path, body)
        except httpx.ConnectError:
            where = f"{self._http.base_url.host}:{self._http.base_url.port}"
            raise click.ClickException(
                f"cannot connect to {where} (admin URL {self._url}): {NOT_LISTENING}") from None
        except httpx.HTTPError as exc:
            raise click.ClickException(f"{method} {path}: {exc}") from None
        if resp.status_code >= 400:
            raise click.ClickException(for_a_person(method, path, resp.status_code, _reason(resp)))
        if raw:
            return resp
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


# (what the broker said, what a CLI user should do); the broker's reason stays in the line.
_ADVICE = [
    ("is a partitioned topic", "use --partitioned, or name one partition (NAME-partition-N)"),
    ("Partitioned topic", "create it with `topics create-partitioned-topic`"),
    ("Tenant", "create it with `quire admin tenants create TENANT`"),
    ("Namespace", "create it with `quire admin namespaces create TENANT/NAMESPACE`"),
    ("Subscription", "list them with `quire admin topics subscriptions TOPIC`"),
    ("Topic", "list them with `quire admin topics list TENANT/NAMESPACE`"),
]


def for_a_person(method: str, path: str, status: int, reason: str) -> str:
    """An admin error as one line for a CLI user: the broker's reason and what to do next,
    then the request that failed (the HTTP detail last, for whoever reports a bug)."""
    advice = ""
    if "is a partitioned topic" in reason:
        reason = reason[:reason.index("is a partitioned topic") + len("is a partitioned topic")]
        advice = _ADVICE[0][1]
        if path.endswith("/stats"):
            advice = "use `topics partitioned-stats`, or name one partition (NAME-partition-N)"
    elif status == 404:
        advice = next((a for key, a in _ADVICE[1:] if reason.startswith(key) and ("not exist" in reason or "not found" in reason)), "")
    elif status == 409 and "already exists" in reason:
        advice = "nothing to do if that is the one you meant"
    elif status in (401, 403):
        advice = "the admin API refused the credentials"
    tail = f" ({method} {path}: HTTP {status})"
    return f"{reason}: {advice}{tail}" if advice else f"{reason}{tail}"


SIZE_UNITS = {"": 1, "M": 1, "K": 1 / 1024, "G": 1024, "T": 1024 * 1024}


def parse_size_mb(text: str) -> int:
    """pulsar-admin's sizes: ``10G``, ``512M``, ``100K``, a bare number is MB, ``-1`` infinite."""
    t = str(text).strip()
    if t == "-1":
        return -1
    unit = t[-1].upper() if t and t[-1].isalpha() else ""
    if unit not in SIZE_UNITS:
        raise click.BadParameter(f"{text!r}: a size is a number with K, M, G or T (e.g. 10G), or -1")
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        raise click.BadParameter(f"{text!r}: a size is a number with K, M, G or T (e.g. 10G), or -1") from None
    if value < 0:
        raise click.BadParameter(f"{text!r}: negative size (use -1 for infinite)")
    return int(value * SIZE_UNITS[unit])


SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration_s(text: str, bare: str) -> int:
    """pulsar-admin's durations (``30s``, ``90m``, ``3h``, ``2d``, ``1w``) in seconds; a bare
    number has unit ``bare``; ``-1`` (infinite) stays -1."""
    t = str(text).strip()
    if t == "-1":
        return -1
    unit = t[-1].lower() if t and t[-1].isalpha() else bare
    number = t[:-1] if t and t[-1].isalpha() else t
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in SECONDS or value < 0:
        raise click.BadParameter(f"{text!r}: a duration is a number with s, m, h, d or w (e.g. 3h), or -1")
    return int(value * SECONDS[unit])


def parse_time_minutes(text: str) -> int:
    """A retention time in minutes: ``3h``, ``90m``, ``2d``, ``1w``; a bare number is minutes."""
    seconds = _duration_s(text, "m")
    return -1 if seconds == -1 else seconds // 60


def parse_time_seconds(text: str) -> int:
    """A TTL or expiry in seconds: ``3h``, ``30m``, ``45s``; a bare number is seconds."""
    return _duration_s(text, "s")


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


def _out(value: Any, none: str | None = None) -> None:
    if value is None and none is not None:
        click.echo(none)
    if value is not None:
        click.echo(json.dumps(value, indent=2, sort_keys=True) if not isinstance(value, str) else value)


@click.group()
@click.option("--admin-url", default="http://localhost:8080", envvar="QUIRE_ADMIN_URL", show_default=True,
              help="the broker's admin URL (also QUIRE_ADMIN_URL; accepted before or after the subcommand)")
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


@tenants.command("get")
@click.argument("tenant")
@click.pass_obj
def tenants_get(api: AdminClient, tenant: str) -> None:
    """Show a tenant's admin roles and allowed clusters."""
    _out(api.call("GET", f"/admin/v2/tenants/{tenant}"))


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
    """Every policy of the namespace (bundles, retention, TTL, deduplication ...)."""
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}"))


@namespaces.command("topics")
@click.argument("namespace")
@click.pass_obj
def namespaces_topics(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}/topics"))


@namespaces.command("set-retention")
@click.argument("namespace")
@click.option("--size", "size", required=True,
              help="retention size per topic: 10G, 512M, 100K, T; a bare number is MB; -1: infinite")
@click.option("--time", "time", required=True,
              help="retention time: 3h, 90m, 2d, 1w, 30s; a bare number is minutes; -1: infinite")
@click.pass_obj
def namespaces_set_retention(api: AdminClient, namespace: str, size: str, time: str) -> None:
    api.call("POST", f"/admin/v2/namespaces/{namespace}/retention",
             {"retentionSizeInMB": parse_size_mb(size), "retentionTimeInMinutes": parse_time_minutes(time)})


@namespaces.command("get-retention")
@click.argument("namespace")
@click.pass_obj
def namespaces_get_retention(api: AdminClient, namespace: str) -> None:
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}/retention"))


@namespaces.command("set-message-ttl")
@click.argument("namespace")
@click.option("--ttl", "ttl", required=True, help="message TTL: 3h, 30m, 45s; a bare number is seconds")
@click.pass_obj
def namespaces_set_ttl(api: AdminClient, namespace: str, ttl: str) -> None:
    api.call("POST", f"/admin/v2/namespaces/{namespace}/messageTTL", parse_time_seconds(ttl))


@namespaces.command("get-message-ttl")
@click.argument("namespace")
@click.pass_obj
def namespaces_get_ttl(api: AdminClient, namespace: str) -> None:
    """The namespace's message TTL in seconds (null: the broker default)."""
    _out(api.call("GET", f"/admin/v2/namespaces/{namespace}/messageTTL"), none="null (the broker default applies)")


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


@topics.command("list-partitioned-topics")
@click.argument("namespace")
@click.pass_obj
def topics_list_partitioned(api: AdminClient, namespace: str) -> None:
    """The partitioned topics of a namespace (their parents, not the partitions)."""
    _out(api.call("GET", f"/admin/v2/persistent/{namespace}/partitioned"))


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
@click.option("-m", "--message-id", type=click.Choice(["latest", "earliest"]), default="latest", show_default=True,
              help="where the subscription starts")
@click.pass_obj
def topics_create_subscription(api: AdminClient, topic: str, subscription: str, message_id: str) -> None:
    body = {"ledgerId": -1, "entryId": -1} if message_id == "earliest" else None
    api.call("PUT", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}", body)


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


@topics.command("terminate")
@click.argument("topic")
@click.pass_obj
def topics_terminate(api: AdminClient, topic: str) -> None:
    """No more messages may be published to TOPIC; prints the last message id."""
    _out(api.call("POST", f"/admin/v2/{topic_path(topic)}/terminate"))


@topics.command("expire-messages")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.option("-t", "--expire-time", "expire", required=True,
              help="acknowledge messages older than this: 3h, 30m, 45s; a bare number is seconds")
@click.pass_obj
def topics_expire_messages(api: AdminClient, topic: str, subscription: str, expire: str) -> None:
    """Acknowledge a subscription's messages older than --expire-time."""
    api.call("POST", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}/expireMessages/"
             f"{parse_time_seconds(expire)}")


def _payload_text(body: bytes) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body.hex(" ")
    return text if all(c.isprintable() or c in "\n\t" for c in text) else body.hex(" ")


def _show_message(resp: httpx.Response, index: int | None = None) -> None:
    """A peeked entry as pulsar-admin prints it: id, publish time, key, properties, payload;
    a batch shows each of its messages (``Batch Message ID: ledger:entry:index``)."""
    h = resp.headers
    props = {k[len("x-pulsar-property-"):]: v for k, v in h.items() if k.lower().startswith("x-pulsar-property-")}
    msg_id = h.get("x-pulsar-message-id")
    click.echo(f"Message ID: {msg_id}" + (f" (#{index})" if index else ""))
    click.echo(f"Publish time: {h.get('x-pulsar-publish-time')}")
    if "x-pulsar-event-time" in h:
        click.echo(f"Event time: {h['x-pulsar-event-time']}")
    if "x-pulsar-partition-key" in h:
        click.echo(f"Key: {h['x-pulsar-partition-key']}")
    batch = int(h.get("x-pulsar-num-batch-message", "0") or 0)
    if batch and "x-pulsar-compression" not in h:
        from clients.protocol.batch import parse_batch

        for i, (meta, payload) in enumerate(parse_batch(resp.content, batch)):
            inner = {p.key: p.value for p in meta.properties}
            key = f", key:[{meta.partition_key}]" if meta.HasField("partition_key") else ""
            click.echo(f"Batch Message ID: {msg_id}:{i}{key}, properties:{json.dumps(inner, sort_keys=True)}, "
                       f"content:{_payload_text(payload)}")
        return
    click.echo(f"Properties: {json.dumps(props, sort_keys=True)}")
    if "x-pulsar-compression" in h:
        click.echo(f"(payload compressed with codec {h['x-pulsar-compression']}, shown as stored)")
    click.echo(_payload_text(resp.content))


@topics.command("peek-messages")
@click.argument("topic")
@click.option("-s", "--subscription", required=True)
@click.option("-n", "--count", default=1, show_default=True, help="messages to peek")
@click.pass_obj
def topics_peek(api: AdminClient, topic: str, subscription: str, count: int) -> None:
    """Show a subscription's next messages without acknowledging them."""
    for i in range(1, count + 1):
        try:
            resp = api.call("GET", f"/admin/v2/{topic_path(topic)}/subscription/{subscription}/position/{i}", raw=True)
        except click.ClickException as exc:
            if i > 1 and "there is no message" in exc.message:
                break
            raise
        _show_message(resp, i if count > 1 else None)


@topics.command("examine-message")
@click.argument("topic")
@click.option("-i", "--initial-position", type=click.Choice(["earliest", "latest"]), default="latest",
              show_default=True)
@click.option("-m", "--message-position", default=1, show_default=True, help="1: the first/last message")
@click.pass_obj
def topics_examine(api: AdminClient, topic: str, initial_position: str, message_position: int) -> None:
    """Show one message counted from the earliest or the latest, without any subscription."""
    resp = api.call("GET", f"/admin/v2/{topic_path(topic)}/examinemessage?initialPosition={initial_position}"
                    f"&messagePosition={message_position}", raw=True)
    _show_message(resp)
