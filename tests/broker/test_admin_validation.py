"""Unit tests of admin input validation (broker.policies), defensive bundle math, the admin
app's error boundary and body cap (in process, a stub service), and the network defaults."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from broker.admin import build_app
from broker.authorization import Authorizer
from broker.config import BrokerConfig
from broker.errors import BadRequestError, InvalidPoliciesError, PreconditionFailedError
from broker.names import NamespaceName, TopicName
from broker.namespaces import default_policies
from broker.ownership import bundle_of, bundles
from quire.security.providers import AuthenticationService
from broker.policies import (
    check_stored,
    int_field,
    parse_auto_topic_creation,
    parse_bundles,
    parse_message_id,
    parse_namespace_policies,
    parse_retention,
    query_flag,
)

NS = NamespaceName("public", "default")


@pytest.mark.parametrize("value", [True, 1.0, float("nan"), float("inf"), "1", [1], {"a": 1}, None, 10**30, -(10**30)])
def test_int_field_refuses_non_ints_and_out_of_range(value: Any) -> None:
    with pytest.raises(BadRequestError, match="f.x"):
        int_field("f.x", value, -5, 2**31)


def test_int_field_precondition_and_bounds() -> None:
    assert int_field("f", 7, 0, 10) == 7
    with pytest.raises(PreconditionFailedError, match="f must be >= 0"):
        int_field("f", -1, -10, 10, precondition_below=0)


@pytest.mark.parametrize("body,field", [
    ({"numBundles": -3}, "bundles.numBundles"),
    ({"numBundles": 0}, "bundles.numBundles"),
    ({"numBundles": 129}, "bundles.numBundles"),
    ({"numBundles": "4"}, "bundles.numBundles"),
    ({"boundaries": "zz"}, "bundles.boundaries"),
    ({"boundaries": ["0x00000000"]}, "bundles.boundaries"),
    ({"boundaries": ["0x00000000", "zz", "0xffffffff"]}, "bundles.boundaries"),
    ({"boundaries": ["0x00000000", "0x80000000", "0x40000000", "0xffffffff"]}, "bundles.boundaries"),
    ({"boundaries": ["0x00000010", "0xffffffff"]}, "bundles.boundaries"),
    ({"boundaries": ["0x00000000", "0x1ffffffff"]}, "bundles.boundaries"),
    ({"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 2}, "bundles.numBundles"),
    ({}, "bundles"),
    ([4], "bundles"),
])
def test_bad_bundles(body: Any, field: str) -> None:
    with pytest.raises(BadRequestError, match=field.replace(".", r"\.")):
        parse_bundles(body)


def test_good_bundles_are_normalised() -> None:
    assert parse_bundles({"numBundles": 2}) == {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
    got = parse_bundles({"boundaries": ["0x00000000", "0x8000000A", "0xFFFFFFFF"]})
    assert got == {"boundaries": ["0x00000000", "0x8000000a", "0xffffffff"], "numBundles": 2}


def test_policy_bodies() -> None:
    assert parse_retention({"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}) == {
        "retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    with pytest.raises(PreconditionFailedError):
        parse_retention({"retentionTimeInMinutes": 0, "retentionSizeInMB": 5})
    with pytest.raises(BadRequestError, match="defaultNumPartitions"):
        parse_auto_topic_creation({"allowAutoTopicCreation": True, "topicType": "partitioned",
                                   "defaultNumPartitions": "abc"})
    with pytest.raises(PreconditionFailedError, match="maximum of 4"):
        parse_auto_topic_creation({"allowAutoTopicCreation": True, "defaultNumPartitions": 5}, max_partitions=4)
    assert parse_auto_topic_creation({"allowAutoTopicCreation": False}) == {"allowAutoTopicCreation": False}
    with pytest.raises(PreconditionFailedError, match="topicType"):
        parse_auto_topic_creation({"allowAutoTopicCreation": True, "topicType": "weird"})
    with pytest.raises(BadRequestError, match="topicType"):
        parse_auto_topic_creation({"allowAutoTopicCreation": True, "topicType": 3})
    assert parse_message_id({"ledgerId": 3, "entryId": -1}) == (3, -1, -1)
    with pytest.raises(BadRequestError, match="entryId"):
        parse_message_id({"ledgerId": 3, "entryId": 2**63})
    with pytest.raises(BadRequestError, match="message_ttl_in_seconds"):
        parse_namespace_policies({"message_ttl_in_seconds": "x", "unknownField": object()})
    assert parse_namespace_policies({"unknownField": [1], "deduplicationEnabled": None}) == {"deduplicationEnabled": None}
    assert query_flag("force", None) is False and query_flag("force", "TRUE") is True
    with pytest.raises(BadRequestError, match="force"):
        query_flag("force", "1")


@pytest.mark.parametrize("change,field", [
    ({"bundles": {"numBundles": -3, "boundaries": ["0xffffffff"]}}, "bundles"),
    ({"bundles": {"boundaries": "zz"}}, "bundles.boundaries"),
    ({"bundles": None}, "bundles"),
    ({"autoTopicCreationOverride": {"allowAutoTopicCreation": True, "defaultNumPartitions": "abc"}},
     "defaultNumPartitions"),
    ({"retention_policies": {"retentionTimeInMinutes": [1], "retentionSizeInMB": 1}}, "retentionTimeInMinutes"),
    ({"message_ttl_in_seconds": float("inf")}, "messageTTL"),
])
def test_stored_policies_from_an_older_version(change: dict[str, Any], field: str) -> None:
    policies = default_policies(4, "standalone")
    assert check_stored(NS, dict(policies)) == policies
    policies.update(change)
    with pytest.raises(InvalidPoliciesError, match=f"public/default.*{field}"):
        check_stored(NS, policies)
    with pytest.raises(InvalidPoliciesError):
        check_stored(NS, ["not", "a", "dict"])


def test_bundle_math_refuses_bad_boundaries_with_an_error() -> None:
    topic = TopicName.parse("persistent://public/default/t")
    for bad in (["0xffffffff"], ["zz"], "zz", [], None, ["0x00000000", "0x00000000"]):
        with pytest.raises(InvalidPoliciesError):
            bundle_of(topic, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidPoliciesError):
            bundles(bad)  # type: ignore[arg-type]
    assert bundle_of(topic, ["0x00000000", "0xffffffff"]) == "0x00000000_0xffffffff"


def test_network_defaults() -> None:
    c = BrokerConfig()
    assert c.bind_address == "127.0.0.1" and c.advertised_address == "127.0.0.1"
    assert BrokerConfig(bind_address="10.1.2.3").advertised_address == "10.1.2.3"
    assert BrokerConfig(bind_address="0.0.0.0").advertised_address == "127.0.0.1"
    assert BrokerConfig(bind_address="0.0.0.0", advertised_address="h.example").advertised_address == "h.example"
    assert BrokerConfig(bind_address="::1").advertised_address == "[::1]"  # usable in pulsar://host:port
    assert c.http_max_request_size == 1024 * 1024


# -- the admin app in process -------------------------------------------------------------------

class _Boom:
    async def clusters(self) -> list[str]:
        raise RuntimeError("a bug reading /var/lib/quire/secret.key")


class _StubService:
    ready = True

    def __init__(self) -> None:
        self.config = BrokerConfig(http_max_request_size=1000)
        self.namespaces = _Boom()
        self.authn = AuthenticationService.from_config(self.config)
        self.authz = Authorizer(self.config, self.namespaces)  # type: ignore[arg-type]


async def test_unexpected_error_is_a_logged_json_500_and_the_app_keeps_serving(caplog: pytest.LogCaptureFixture) -> None:
    app = build_app(_StubService())  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        with caplog.at_level(logging.ERROR, logger="broker.admin"):
            r = await http.get("/admin/v2/clusters")
        # the reason names the exception type only: its text (paths, internals) stays in the log
        assert r.status_code == 500 and r.json()["reason"] == "internal error: RuntimeError"
        assert "secret.key" not in r.text and "Traceback" not in r.text
        assert len([rec for rec in caplog.records if rec.name == "broker.admin"]) == 1  # logged once
        assert (await http.get("/admin/v2/nope")).status_code == 404  # still serving
        # body cap: declared length and streamed body
        r = await http.post("/admin/v2/namespaces/a/b/messageTTL", content=b"1" * 1001)
        assert r.status_code == 413 and "http_max_request_size" in r.json()["reason"]

        async def stream() -> Any:
            for _ in range(10):
                yield b" " * 500
        r = await http.post("/admin/v2/namespaces/a/b/messageTTL", content=stream())
        assert r.status_code == 413, r.text
        # a path name the metadata store could not hold answers 412 before any handler runs
        r = await http.get("/admin/v2/clusters/%2E%2E")
        assert r.status_code == 412 and "cluster" in r.json()["reason"]


class _StoreDown:
    async def clusters(self) -> list[str]:
        from metadata.errors import StoreUnavailableError
        raise StoreUnavailableError("metadata database /var/lib/quire/metadata cannot be written: IO error")


async def test_metadata_errors_do_not_leak_paths() -> None:
    service = _StubService()
    service.namespaces = _StoreDown()  # type: ignore[assignment]
    app = build_app(service)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        r = await http.get("/admin/v2/clusters")
    assert r.status_code == 503 and r.json()["reason"] == "metadata store error: StoreUnavailableError"
    assert "/var/lib" not in r.text
