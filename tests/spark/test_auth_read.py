"""The Spark connector against an authenticated ``quire standalone`` (token authentication and
authorization): StreamNative's ``pulsar.client.authPluginClassName`` / ``authParams`` reach both
the executors' readers and the driver's admin calls (which sent no credentials before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pulsar
import pytest

from tests.e2e.conftest import Standalone, start_standalone
from tests.security.conftest import SUPERUSER, security_args, write_security_files
from quire.security.tokens import create_token

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standalone, bytes]]:
    base: Path = tmp_path_factory.mktemp("spark-secure")
    key, key_file, htpasswd, _ = write_security_files(base)
    node = start_standalone(base, *security_args(key_file, htpasswd), ready_path="/metrics")
    try:
        yield node, key
    finally:
        node.proc.terminate()


def test_read_with_a_token(spark: Any, secured: tuple[Standalone, bytes], tmp_path: Path) -> None:
    node, key = secured
    token = create_token(SUPERUSER, secret_key=key)
    topic = "persistent://public/default/spark-auth"
    c = pulsar.Client(node.url, authentication=pulsar.AuthenticationToken(token),
                      logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"))
    try:
        p = c.create_producer(topic)
        for i in range(20):
            p.send(b"v%02d" % i)
    finally:
        c.close()
    token_file = tmp_path / "token"
    token_file.write_text(token)

    def read(**auth: str) -> Any:
        r = spark.read.format("pulsar").option("service.url", node.url).option("admin.url", node.admin)
        for k, v in {"topic": topic, **auth}.items():
            r = r.option(k, v)
        return r.load()

    rows = read(**{"pulsar.client.authPluginClassName": TOKEN_PLUGIN,
                   "pulsar.client.authParams": f"file://{token_file}"}).select("value").collect()
    assert sorted(bytes(r.value) for r in rows) == [b"v%02d" % i for i in range(20)]
    with pytest.raises(Exception, match="401"):  # no credentials: the admin API refuses the planning
        read().count()
