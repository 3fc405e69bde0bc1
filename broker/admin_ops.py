"""Admin routes for operators, kept apart from ``broker.admin``'s core table.

Pulsar's paths for the ``pulsar-admin`` verbs quire's core table lacked (peek-messages,
examine-message, expire-messages, terminate) and quire's own ``cluster-status`` view. The
handlers use ``broker.admin``'s wrapper, so errors have the same JSON shape and status codes.
Peek and examine answer as Pulsar does: the message payload as the body, its id, publish
time, key and properties in ``X-Pulsar-*`` headers.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from broker.admin import _wrap
from broker.authorization import Access
from broker.entry_meta import parse_metadata
from broker.errors import BadRequestError, MessageNotFoundError, PreconditionFailedError
from broker.names import TopicName
from broker.policies import INT64_MAX, int_field
from clients.protocol import frames
from managed_ledger import Position

if TYPE_CHECKING:
    from broker.admin import AdminApi

_TP = "/admin/v2/{domain:str}/{tenant}/{namespace}/{topic}"
_SUB = _TP + "/subscription/{subscription}"


def _message_response(name: TopicName, pos: Position, data: bytes) -> Response:
    """An entry as Pulsar's peek answers it: payload body, metadata in headers."""
    parsed = frames.parse_entry(data)
    md = parsed.metadata
    headers = {
        "X-Pulsar-Message-ID": f"{pos.ledger_id}:{pos.entry_id}",
        "X-Pulsar-publish-time": str(md.publish_time),
        "X-Pulsar-producer-name": md.producer_name,
        "X-Pulsar-sequence-id": str(md.sequence_id),
    }
    if md.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = md.partition_key
    if md.HasField("event_time"):
        headers["X-Pulsar-event-time"] = str(md.event_time)
    if md.compression:
        headers["X-Pulsar-compression"] = str(md.compression)
    if md.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(md.num_messages_in_batch)
    for kv in md.properties:
        headers[f"X-Pulsar-PROPERTY-{kv.key}"] = kv.value
    # Header values must be latin-1; anything else is percent-free JSON-escaped.
    headers = {k: v if v.isascii() else json.dumps(v) for k, v in headers.items()}
    return Response(bytes(parsed.payload), media_type="application/octet-stream", headers=headers)


async def _nth_after(api: "AdminApi", name: TopicName, start: Position, n: int, inclusive: bool) -> tuple[Position, bytes]:
    """The ``n``-th entry (1-based) from ``start`` on, read without moving any cursor."""
    topic = await api._loaded(name)
    cursor = topic.ml.open_non_durable_cursor(start, inclusive=inclusive)
    try:
        entries = await cursor.read_entries(n)
    finally:
        await cursor.close()
    if len(entries) < n:
        raise MessageNotFoundError(f"there is no message {n} at that position of {name} ({len(entries)} available)")
    entry = entries[n - 1]
    return entry.position, bytes(entry.data)


async def _one_partition_here(api: "AdminApi", request: Request, name: TopicName, verb: str) -> Response | None:
    """For a verb on one non-partitioned topic: 412 for a partitioned topic's parent, a 307 to
    the owner when another broker serves the topic, None when this broker does."""
    if await api.ns.partitions(name):
        raise PreconditionFailedError(f"{name} is a partitioned topic: {verb} one of its partitions (-partition-N)")
    return await api._owner_redirect(request, name)


@_wrap
async def peek_messages(api: "AdminApi", request: Request) -> Any:
    """GET .../subscription/{sub}/position/{n}: the n-th unacknowledged message of a subscription."""
    name = api._topic(request)
    n = int_field("messagePosition", request.path_params["n"], 1, INT64_MAX, precondition_below=1)
    redirect = await _one_partition_here(api, request, name, "peek")
    if redirect is not None:
        return redirect
    topic = await api._loaded(name)
    sub = topic.subscription(request.path_params["subscription"])
    pos, data = await _nth_after(api, name, sub.cursor.mark_delete_position, n, inclusive=False)
    return _message_response(name, pos, data)


@_wrap
async def examine_message(api: "AdminApi", request: Request) -> Any:
    """GET .../examinemessage?initialPosition=earliest|latest&messagePosition=n."""
    name = api._topic(request)
    where = request.query_params.get("initialPosition", "latest")
    if where not in ("earliest", "latest"):
        raise PreconditionFailedError(f"initialPosition must be earliest or latest, not {where!r}")
    raw = request.query_params.get("messagePosition", "1")
    try:
        n = int_field("messagePosition", int(raw), 1, INT64_MAX, precondition_below=1)
    except ValueError:
        raise BadRequestError(f"messagePosition must be an integer, got {raw!r}") from None
    redirect = await _one_partition_here(api, request, name, "examine")
    if redirect is not None:
        return redirect
    topic = await api._loaded(name)
    ml = topic.ml
    if where == "earliest":
        pos, data = await _nth_after(api, name, Position(-1, -1), n, inclusive=False)
        return _message_response(name, pos, data)
    # latest: walk back from the last entry, n - 1 entries (only within the last ledger's run).
    last = ml.last_confirmed_entry
    if last.entry_id < 0 or last.entry_id - (n - 1) < 0:
        raise MessageNotFoundError(f"{name} has no message {n} from the latest")
    pos = Position(last.ledger_id, last.entry_id - (n - 1))
    entry = await ml.read_entry(pos)
    return _message_response(name, pos, bytes(entry.data))


@_wrap
async def expire_messages(api: "AdminApi", request: Request) -> Any:
    """POST .../subscription/{sub}/expireMessages/{seconds}: acknowledge messages older than that."""
    name = api._topic(request)
    seconds = int_field("expireTimeInSeconds", request.path_params["seconds"], 0, INT64_MAX)
    cutoff = int(time.time() * 1000) - seconds * 1000
    sub_name = request.path_params["subscription"]

    async def expire(t: TopicName) -> None:
        sub = (await api._loaded(t)).subscription(sub_name)
        async with sub.lock:
            newest = await sub.cursor.find_newest_matching(lambda e: parse_metadata(e.data).publish_time < cutoff)
            if newest is not None and newest > sub.cursor.mark_delete_position:
                await sub.cursor.mark_delete(newest)
                sub.msg_expired += 1
                sub.notify()
    result = await api._for_each(request, name, expire)
    return result if isinstance(result, Response) else None


@_wrap
async def terminate(api: "AdminApi", request: Request) -> Any:
    """POST .../terminate: no more messages may be published; answers the last message id."""
    name = api._topic(request)
    redirect = await _one_partition_here(api, request, name, "terminate")
    if redirect is not None:
        return redirect
    pos = await (await api._loaded(name)).ml.terminate()
    return {"ledgerId": pos.ledger_id, "entryId": pos.entry_id, "partitionIndex": -1}


@_wrap
async def cluster_status(api: "AdminApi", request: Request) -> Any:
    """GET /admin/v2/quire/cluster-status: brokers, bookies, bundle owners, under-replication."""
    from broker.cluster_status import collect

    return await collect(api.service.store, api.service.ledger_client_config)


# (path, handler, {method: the Access it needs}), like broker.admin.ROUTE_TABLE (the access
# test walks both)
OPS_ROUTES: list[tuple[str, Any, dict[str, Access]]] = [
    (_SUB + "/position/{n:int}", peek_messages, {"GET": Access.CONSUME}),
    (_TP + "/examinemessage", examine_message, {"GET": Access.CONSUME}),
    (_SUB + "/expireMessages/{seconds:int}", expire_messages, {"POST": Access.CONSUME}),
    (_TP + "/terminate", terminate, {"POST": Access.TENANT_ADMIN}),
    ("/admin/v2/quire/cluster-status", cluster_status, {"GET": Access.SUPERUSER}),
]
