"""Admin HTTP fuzzing against a live standalone (issue 10): random methods on paths built from
the route table with hostile segments and query values, random JSON bodies (wrong types, huge
numbers, NaN/Infinity, nested lists) for the policy routes. After each example: no answer is
an unexpected 500 (the catch-all's "internal error"), every error is a JSON reason, and the
process is alive and serving (admin and lookup liveness probes).

Short and derandomized by default; ``QUIRE_ADMIN_FUZZ_EXAMPLES=N`` runs N random examples.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections import Counter
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.admin import ROUTE_TABLE
from tests.e2e.conftest import Standalone, start_standalone

_LONG = int(os.environ.get("QUIRE_ADMIN_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_LONG or 100, derandomize=not _LONG, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

TENANT, NAMESPACE = "fz", "ns"
# Names the fuzz may use as they are; public/default and cluster "standalone" stay out of reach
# so the liveness probes keep a namespace nothing random can delete.
GOOD = {
    "tenant": [TENANT], "namespace": [NAMESPACE], "cluster": ["fzc"], "domain": ["persistent"],
    "topic": ["t", "p", "t-partition-0"], "subscription": ["s"], "bundle": ["0x00000000_0x40000000"],
    "n": ["0", "3"], "timestamp": ["0", "1700000000000"],
}
HOSTILE = [
    "..", ".", "%2E%2E", "%2e", "%2F", "%00", "%ff", "%", "a" * 300, "%20", " x", "é", "☃", "{x}",
    "-1", "0", "9" * 30, "NaN", "Infinity", "1e999", "t-partition-99999999999999999999", "t-partition--1",
    "non-persistent", "persistent%3A", "null", "[]", "a%2F..%2Fb", "'", '"', "\\",
]
QUERY_KEYS = ["force", "perPartition", "authoritative", "x", "partitions", "backlogQuotaType"]
QUERY_VALUES = ["true", "false", "TRUE", "", "maybe", "1", "9" * 30, "NaN", "[1]", "%00", "destination_storage"]
POLICY_KEYS = ["retentionTimeInMinutes", "retentionSizeInMB", "allowAutoTopicCreation", "topicType",
               "defaultNumPartitions", "bundles", "numBundles", "boundaries", "ledgerId", "entryId",
               "partitionIndex", "partitions", "allowedClusters", "adminRoles", "serviceUrl",
               "message_ttl_in_seconds", "deduplicationEnabled", "autoTopicCreationOverride",
               "retention_policies", "replication_clusters", "limitSize", "limitTime", "policy",
               "bookkeeperEnsemble", "bookkeeperWriteQuorum", "bookkeeperAckQuorum", "backlog_quota_map",
               "persistence"]

STATUSES: Counter[int] = Counter()  # answers seen, to check the fuzz reaches the handlers
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def _weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:  # type: ignore[type-arg]
    """One of the strategies, picked with the given integer weights."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


def _segment(name: str) -> st.SearchStrategy[str]:
    # Mostly good names, so most examples reach a handler and its body/query parsing.
    return _weighted((6, st.sampled_from(GOOD.get(name, ["x"]))), (2, st.sampled_from(HOSTILE)),
                     (1, st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)))


@st.composite
def paths(draw: st.DrawFn) -> tuple[str, str]:
    """A path from the route table with each parameter good or hostile, and one of its methods."""
    template, _, methods = draw(st.sampled_from(ROUTE_TABLE))
    path = _PARAM.sub(lambda m: "\0" + m.group(1) + "\0", template)
    parts = path.split("\0")
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            value = draw(_segment(part))
            out.append(value if value in HOSTILE else quote(value, safe=""))  # hostile ones raw
        else:
            out.append(part)
    return "".join(out), draw(st.sampled_from(methods))


scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["0x00000000", "0xffffffff", "zz", "partitioned", "non-partitioned", "standalone"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(POLICY_KEYS) | st.text(max_size=6), children,
                                               max_size=5)),
    max_leaves=12,
)
policy_objects = st.dictionaries(st.sampled_from(POLICY_KEYS), json_values, min_size=1, max_size=4)
bodies = _weighted(
    (1, st.none()),
    (4, policy_objects.map(lambda v: json.dumps(v, allow_nan=True).encode())),
    (3, json_values.map(lambda v: json.dumps(v, allow_nan=True).encode())),
    (1, st.binary(max_size=64)),
    (1, st.sampled_from([b"[" * 3000, b"{" * 3000, b'{"a":' * 2000, b"1" * 5000, b"-0", b"1e400", b"\xff"])),
)
queries = st.dictionaries(st.sampled_from(QUERY_KEYS), st.sampled_from(QUERY_VALUES), max_size=2)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    base: Path = tmp_path_factory.mktemp("admin-fuzz")
    # A valid partition count can be huge; a bound keeps one example from creating thousands.
    node = start_standalone(base, "--set", "max_num_partitions_per_partitioned_topic=4")
    try:
        a = httpx.Client(base_url=node.admin, timeout=30)
        assert a.put(f"/admin/v2/tenants/{TENANT}", json={"allowedClusters": ["standalone"]}).status_code == 204
        assert a.put(f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}").status_code == 204
        assert a.put(f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/t").status_code == 204
        assert a.put(f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/p/partitions", json=2).status_code == 204
        yield node
    finally:
        code = node.proc.terminate()
        print(node.proc.log_tail(30))
    assert code == 0


@pytest.fixture(scope="module")
def http(node: Standalone) -> Iterator[httpx.Client]:
    # No keep-alive: the server may close a connection whose request body it did not read (as
    # any HTTP/1.1 server may), and a reused socket would then look like a dead server.
    with httpx.Client(base_url=node.admin, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as c:
        yield c


def assert_alive(node: Standalone, http: httpx.Client) -> None:
    assert node.proc.is_running, node.proc.log_tail(40)
    assert http.get("/admin/v2/clusters").status_code == 200
    lookup = http.get("/lookup/v2/topic/persistent/public/default/fuzz-probe")
    assert lookup.status_code == 200 and lookup.json()["brokerUrl"] == node.url, lookup.text


def check(node: Standalone, http: httpx.Client, method: str, url: str, body: bytes | None) -> None:
    r = http.request(method, url, content=body, headers={"content-type": "application/json"})
    STATUSES[r.status_code] += 1
    context = f"{method} {url} body={body[:80] if body else body!r} -> {r.status_code} {r.text[:300]}"
    if r.status_code >= 400 and method != "HEAD":
        try:
            reason = r.json()["reason"]
        except (ValueError, KeyError, TypeError):
            raise AssertionError(f"error without a JSON reason: {context}") from None
        assert not reason.startswith("internal error"), context
    # 5xx only for the server's own conditions (not ready, store/ledger trouble), never bad input
    assert r.status_code < 500 or r.status_code in (503,), context
    assert_alive(node, http)


def _url(path: str, query: dict[str, str]) -> str:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return path + ("?" + qs if qs else "")


@FUZZ
@given(route=paths(), method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
       use_route_method=st.integers(0, 3), query=queries, body=bodies)
def test_admin_routes_fuzz(node: Standalone, http: httpx.Client, route: tuple[str, str], method: str,
                           use_route_method: int, query: dict[str, str], body: bytes | None) -> None:
    path, route_method = route
    check(node, http, route_method if use_route_method else method, _url(path, query), body)


# Routes that take a JSON body, on names that exist, with the methods that read it.
BODY_ROUTES = [
    ("POST", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}/retention"),
    ("POST", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}/messageTTL"),
    ("POST", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}/deduplication"),
    ("POST", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}/autoTopicCreation"),
    ("PUT", f"/admin/v2/namespaces/{TENANT}/fresh"),
    ("PUT", "/admin/v2/tenants/fresh"),
    ("POST", f"/admin/v2/tenants/{TENANT}"),
    ("PUT", "/admin/v2/clusters/fresh"),
    ("PUT", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/fresh/partitions"),
    ("POST", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/p/partitions"),
    ("PUT", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/t/subscription/s"),
    ("POST", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/t/subscription/s/resetcursor"),
]


@FUZZ
@given(route=st.sampled_from(BODY_ROUTES), body=bodies, query=queries)
def test_policy_bodies_fuzz(node: Standalone, http: httpx.Client, route: tuple[str, str], body: bytes | None,
                            query: dict[str, str]) -> None:
    method, path = route
    check(node, http, method, _url(path, query), body)
    # whatever was accepted is usable: the namespace still answers lookups
    r = http.get(f"/lookup/v2/topic/persistent/{TENANT}/{NAMESPACE}/t")
    assert r.status_code == 200, r.text
    for fresh in ("/admin/v2/namespaces/fz/fresh", "/admin/v2/tenants/fresh", "/admin/v2/clusters/fresh",
                  "/admin/v2/persistent/fz/ns/fresh/partitions"):
        http.delete(fresh)  # so the next example creates them again


raw_requests = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda m, p, h, b: m + b" " + p + b" HTTP/1.1\r\nHost: x\r\n" + h + b"\r\n" + b,
              st.sampled_from([b"GET", b"PUT", b"POST", b"DELETE", b"G\x00T", b""]),
              st.sampled_from([b"/admin/v2/clusters", b"/admin/v2/tenants/%", b"*", b"/" + b"a" * 9000, b"/%ff%00"]),
              st.sampled_from([b"", b"Content-Length: -1\r\n", b"Content-Length: 99999999999999999999\r\n",
                               b"Transfer-Encoding: chunked\r\n", b"Content-Length: 5\r\n",
                               b"X: " + b"y" * 20000 + b"\r\n", b"Content-Length: 1\r\nContent-Length: 2\r\n"]),
              st.sampled_from([b"", b"zz\r\n", b"5\r\nhello\r\n0\r\n\r\n", b"{}", b"\xff" * 10])),
)


@FUZZ
@given(data=raw_requests)
def test_raw_http_fuzz(node: Standalone, http: httpx.Client, data: bytes) -> None:
    """Malformed HTTP on the admin port: an error answer or a closed connection, never a crash."""
    with socket.create_connection(("127.0.0.1", node.web_port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # reset by the server: fine
    assert_alive(node, http)


def test_no_unhandled_exception_was_logged(node: Standalone, http: httpx.Client) -> None:
    assert_alive(node, http)
    print("admin fuzz answers:", sorted(STATUSES.items()))
    # the examples got past routing and parsing: some succeeded, some were refused as bad input
    if STATUSES:
        assert sum(n for s, n in STATUSES.items() if s < 300) > 0, STATUSES
        assert sum(n for s, n in STATUSES.items() if s in (400, 412)) > 0, STATUSES
    # Log records with a traceback are bugs, except hypercorn's own "Error in ASGI Framework"
    # when a client hangs up while a reply is being sent (its send/send_eof race on one socket;
    # the connection is dropped, the server keeps serving: see quire/http_guard.py).
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d )", node.proc.log_text())
    bad = [r for r in records if "Traceback" in r and "trio.BusyResourceError" not in r]
    assert not bad, "\n".join(bad)[-3000:]
