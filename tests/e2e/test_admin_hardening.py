"""Hostile and malformed admin input against a real standalone (issue 10): every bad value
answers 4xx with a JSON reason naming the field, request bodies are capped, policies stored by
an older version fail their namespace only, and the standalone listens on loopback by default.
After each case the process must still be alive and serving."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pulsar
import pytest
import trio

from metadata import open_store, values
from tests.e2e.conftest import Standalone, start_standalone
from tests.fixtures.processes import QuireProcess, free_port


@pytest.fixture(scope="module")
def admin(standalone: Standalone) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=standalone.admin, timeout=30) as a:
        yield a


def assert_serving(node: Standalone) -> None:
    assert node.proc.is_running, node.proc.log_tail(40)
    r = httpx.get(f"{node.admin}/admin/v2/clusters", timeout=10)
    assert r.status_code == 200 and r.json() == ["standalone"]


def assert_reason(r: httpx.Response, status: int, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    reason = r.json()["reason"]
    for w in words:
        assert w in reason, (w, reason)


def test_bad_bundle_and_auto_creation_policies_are_refused(standalone: Standalone, admin: httpx.Client) -> None:
    # All three were answered 204, and the next lookup in the namespace killed the process.
    ns = f"public/bad-{uuid.uuid4().hex[:6]}"
    assert_reason(admin.put(f"/admin/v2/namespaces/{ns}", json={"bundles": {"numBundles": -3}}),
                  400, "bundles.numBundles")
    assert_reason(admin.put(f"/admin/v2/namespaces/{ns}", json={"bundles": {"boundaries": "zz"}}),
                  400, "bundles.boundaries")
    assert_reason(admin.put(f"/admin/v2/namespaces/{ns}", json={"bundles": {"boundaries": ["0x00000000", "0x10"]}}),
                  400, "bundles.boundaries")
    assert admin.get(f"/admin/v2/namespaces/{ns}").status_code == 404  # nothing was stored
    assert admin.put(f"/admin/v2/namespaces/{ns}", json={"bundles": {"numBundles": 2}}).status_code == 204
    assert_reason(admin.post(f"/admin/v2/namespaces/{ns}/autoTopicCreation",
                             json={"allowAutoTopicCreation": True, "topicType": "partitioned",
                                   "defaultNumPartitions": "abc"}), 400, "defaultNumPartitions")
    assert admin.get(f"/admin/v2/namespaces/{ns}/autoTopicCreation").status_code == 204  # not set
    # lookups in the namespace work (twice: the first one acquires the bundle)
    client = standalone.client()
    try:
        for _ in range(2):
            producer = client.create_producer(f"persistent://{ns}/t")
            producer.send(b"x")
            producer.close()
    finally:
        client.close()
    assert_serving(standalone)


# (method, path under /admin/v2/namespaces/public/default or a topic, raw JSON body, status, field)
POLICY_CASES = [
    ("POST", "/messageTTL", b"Infinity", 400, "messageTTL"),
    ("POST", "/messageTTL", b"NaN", 400, "messageTTL"),
    ("POST", "/messageTTL", b"1" + b"0" * 30, 400, "messageTTL"),
    ("POST", "/messageTTL", b"[1]", 400, "messageTTL"),
    ("POST", "/messageTTL", b"-5", 412, "messageTTL"),
    ("POST", "/retention", b'{"retentionTimeInMinutes": [1], "retentionSizeInMB": 1}', 400, "retentionTimeInMinutes"),
    ("POST", "/retention", b'{"retentionTimeInMinutes": Infinity, "retentionSizeInMB": 1}', 400, "retentionTimeInMinutes"),
    ("POST", "/retention", b'{"retentionTimeInMinutes": 1, "retentionSizeInMB": 1e30}', 400, "retentionSizeInMB"),
    ("POST", "/retention", b"[]", 400, "retention"),
    ("POST", "/deduplication", b'"yes"', 400, "deduplicationEnabled"),
    ("POST", "/autoTopicCreation", b'{"allowAutoTopicCreation": "true"}', 400, "allowAutoTopicCreation"),
    ("POST", "/autoTopicCreation", b'{"allowAutoTopicCreation": true, "topicType": ["x"]}', 400, "topicType"),
    ("POST", "/autoTopicCreation", b'{"allowAutoTopicCreation": true, "topicType": "partitioned", '
                                   b'"defaultNumPartitions": -1}', 412, "defaultNumPartitions"),
    ("POST", "/messageTTL", b"[" * 5000 + b"]" * 5000, 400, "JSON"),
    ("POST", "/messageTTL", b"\xff\xfe", 400, "JSON"),
]


@pytest.mark.parametrize("method,suffix,body,status,field", POLICY_CASES)
def test_policy_values_are_validated(standalone: Standalone, admin: httpx.Client, method: str, suffix: str,
                                     body: bytes, status: int, field: str) -> None:
    r = admin.request(method, "/admin/v2/namespaces/public/default" + suffix, content=body,
                      headers={"content-type": "application/json"})
    assert_reason(r, status, field)
    assert_serving(standalone)


def test_bodies_and_path_values_of_other_routes(standalone: Standalone, admin: httpx.Client) -> None:
    topic = f"/admin/v2/persistent/public/default/h-{uuid.uuid4().hex[:6]}"
    assert_reason(admin.put(topic + "/partitions", content=b"1" + b"0" * 30), 400, "partitions")
    assert_reason(admin.put(topic + "/partitions", content=b"Infinity"), 400, "partitions")
    assert_reason(admin.put(topic + "/partitions", json=[2]), 400, "partitions")
    assert admin.put(topic).status_code == 204
    assert_reason(admin.put(topic + "/subscription/s", json={"ledgerId": [1], "entryId": 1}), 400, "ledgerId")
    assert_reason(admin.put(topic + "/subscription/s", json={"ledgerId": 1, "entryId": 1e300}), 400, "entryId")
    assert admin.put(topic + "/subscription/s", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    assert_reason(admin.post(topic + "/subscription/s/skip/" + "9" * 30), 400, "numMessages")
    assert_reason(admin.post(topic + "/subscription/s/resetcursor/" + "9" * 30), 400, "timestamp")
    assert_reason(admin.post(topic + "/subscription/s/resetcursor", json={"ledgerId": "x", "entryId": 0}),
                  400, "ledgerId")
    assert_reason(admin.delete(topic + "?force=maybe"), 400, "force")
    assert_reason(admin.put("/admin/v2/tenants/tx", json=[1, 2]), 400, "tenant")
    assert_reason(admin.put("/admin/v2/tenants/tx", json={"allowedClusters": "standalone"}), 400, "allowedClusters")
    assert_reason(admin.put("/admin/v2/clusters/cx", json=[1]), 400, "cluster")
    assert_reason(admin.put("/admin/v2/namespaces/public/nx", json=[1]), 400, "policies")
    assert admin.delete(topic + "?force=true").status_code == 204
    assert_serving(standalone)


@pytest.mark.parametrize("path", [
    "/admin/v2/persistent/public/default/%2E%2E",
    "/admin/v2/persistent/public/%2E%2E/x",
    "/admin/v2/namespaces/public/%2E%2E",
    "/admin/v2/tenants/%2E%2E",
    "/admin/v2/clusters/%2E%2E",
    "/admin/v2/persistent/public/default/%2E%2E/partitions",
])
def test_dot_dot_names_answer_4xx(standalone: Standalone, admin: httpx.Client, path: str) -> None:
    for method in ("PUT", "GET", "DELETE"):
        r = admin.request(method, path, content=b"1" if path.endswith("partitions") else b"")
        assert 400 <= r.status_code < 500, (method, path, r.status_code, r.text)
        assert "reason" in r.json()
    assert_serving(standalone)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_request_bodies_are_capped(standalone: Standalone) -> None:
    pid = standalone.proc.pid
    assert pid is not None
    before = rss_kb(pid)
    # A declared 100 MB body is refused before any of it is sent (so before any is read).
    with socket.create_connection(("127.0.0.1", standalone.web_port), timeout=10) as sock:
        sock.sendall(b"POST /admin/v2/namespaces/public/default/messageTTL HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n")
        head = b""
        while b"http_max_request_size" not in head:  # status line, headers, then the JSON reason
            more = sock.recv(65536)
            if not more:
                break
            head += more
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"http_max_request_size" in head, head[:400]
    # A chunked body (no length announced) is cut off once it passes the cap.
    chunk = b" " * 65536

    def chunks() -> Iterator[bytes]:
        for _ in range(32 * 16):  # 32 MiB
            yield chunk
    r = httpx.post(f"{standalone.admin}/admin/v2/namespaces/public/default/messageTTL", content=chunks(),
                   headers={"content-type": "application/json"}, timeout=60)
    assert_reason(r, 413, "http_max_request_size")
    # A body below the cap still works.
    ok = httpx.post(f"{standalone.admin}/admin/v2/namespaces/public/default/messageTTL",
                    content=b" " * 500_000 + b"0", headers={"content-type": "application/json"}, timeout=30)
    assert ok.status_code == 204, ok.text
    assert rss_kb(pid) - before < 50 * 1024
    assert_serving(standalone)


# -- policies stored by an older version, and the bind address ----------------------------------

def listening_addresses(port: int) -> set[str]:
    """Local addresses of the LISTEN sockets on ``port`` (from /proc/net/tcp and tcp6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            addr, hexport = fields[1].split(":")
            if fields[3] == "0A" and int(hexport, 16) == port:
                if len(addr) == 8:
                    found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
                else:
                    found.add("::" if set(addr) == {"0"} else addr)
    return found


async def _store_bad_policies(data_dir: Path, bad: dict[str, dict[str, Any]]) -> None:
    store = await open_store(f"rocksdb://{data_dir.resolve() / 'metadata'}")
    try:
        for ns, changes in bad.items():
            path = f"/admin/policies/{ns}"
            raw, stat = await store.get(path)
            policies = values.unpack(raw)
            policies.update(changes)
            await store.put(path, values.pack(policies), stat.version)
    finally:
        await store.close()


def test_stored_bad_policies_fail_their_namespace_only_and_bind_address(tmp_path: Path) -> None:
    node = start_standalone(tmp_path)
    try:
        # loopback by default, broker and admin ports alike
        assert listening_addresses(node.port) == {"127.0.0.1"}
        assert listening_addresses(node.web_port) == {"127.0.0.1"}
        a = httpx.Client(base_url=node.admin, timeout=30)
        for ns in ("public/old-bundles", "public/old-boundaries", "public/old-auto"):
            assert a.put(f"/admin/v2/namespaces/{ns}").status_code == 204
    finally:
        assert node.proc.terminate() == 0
    # What an older version accepted with 204 and stored.
    trio.run(_store_bad_policies, tmp_path / "data", {
        "public/old-bundles": {"bundles": {"numBundles": -3, "boundaries": ["0xffffffff"]}},
        "public/old-boundaries": {"bundles": {"boundaries": "zz"}},
        "public/old-auto": {"autoTopicCreationOverride": {"allowAutoTopicCreation": True, "topicType": "partitioned",
                                                           "defaultNumPartitions": "abc"}},
    })
    node = start_standalone(tmp_path, "--bind-address", "0.0.0.0")
    try:
        assert listening_addresses(node.port) == {"0.0.0.0"}
        # the advertised address still works: lookups answer a URL the client can reach
        client = node.client(operation_timeout_seconds=5)
        a = httpx.Client(base_url=node.admin, timeout=30)
        try:
            for ns in ("public/old-bundles", "public/old-boundaries", "public/old-auto"):
                for _ in range(2):  # every lookup answers an error the client does not retry
                    with pytest.raises(pulsar.NotAllowedError):  # the reason is in the HTTP lookup below
                        client.create_producer(f"persistent://{ns}/t")
                    assert_serving(node)
                r = a.get(f"/lookup/v2/topic/persistent/{ns}/t")
                assert_reason(r, 412, ns, "invalid stored policies")
                assert a.get(f"/admin/v2/namespaces/{ns}").status_code == 200  # visible as stored
            # a valid namespace is unaffected
            producer = client.create_producer("persistent://public/default/still-fine")
            producer.send(b"ok")
            producer.close()
            # the operator can repair or remove the broken namespaces
            assert a.delete("/admin/v2/namespaces/public/old-auto/autoTopicCreation").status_code == 204
            producer = client.create_producer("persistent://public/old-auto/t")
            producer.send(b"ok")
            producer.close()
            assert a.delete("/admin/v2/namespaces/public/old-bundles").status_code == 204
            assert a.delete("/admin/v2/namespaces/public/old-boundaries").status_code == 204
        finally:
            client.close()
    finally:
        code = node.proc.terminate()
        print(node.proc.log_tail(30))
    assert code == 0
    assert "Traceback" not in node.proc.log_text()


def hang_up_mid_request(port: int, path: bytes, times: int = 40) -> None:
    """Requests whose body never comes, each followed by a half-close."""
    for i in range(times):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: " + (b"9" * 20 if i % 2 else b"5") + b"\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass


def test_a_client_hanging_up_mid_request_never_ends_the_process(standalone: Standalone) -> None:
    # hypercorn's own error reply for the truncated body and its send_eof collided with our 413
    # on the socket (trio.BusyResourceError) and the error ended the whole process.
    hang_up_mid_request(standalone.web_port, b"/admin/v2/tenants/x")
    assert_serving(standalone)


def test_bookie_http_port_survives_clients_hanging_up(tmp_path: Path) -> None:
    # The same hypercorn race ended `quire bookie` through its HTTP admin port.
    http = free_port()
    proc = QuireProcess.quire(
        ["bookie", "--metadata-url", "memory://hangup", "--port", "0", "--http-port", str(http),
         "--journal-dir", str(tmp_path / "journal"), "--ledger-dirs", str(tmp_path / "ledgers"), "--log-level", "WARNING"],
        log_path=tmp_path / "bookie.log", ready_url=f"http://127.0.0.1:{http}/api/v1/bookie/state")
    proc.start()
    try:
        proc.wait_ready(30)
        hang_up_mid_request(http, b"/api/v1/bookie/state", times=100)
        assert proc.is_running, proc.log_tail(40)
        assert httpx.get(f"http://127.0.0.1:{http}/api/v1/bookie/state", timeout=10).status_code == 200
    finally:
        assert proc.terminate() == 0, proc.log_tail(40)
