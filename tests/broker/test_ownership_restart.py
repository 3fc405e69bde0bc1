"""A broker restarted on the same address does not adopt the bundle node of its previous run."""

import uuid

from broker.names import TopicName
from broker.ownership import OwnershipCache
from metadata import open_store

BOUNDARIES = ["0x00000000", "0xffffffff"]


async def test_a_restarted_broker_acquires_its_bundles_anew() -> None:
    name = f"memory://ownership-{uuid.uuid4().hex}"
    old_run, new_run, other = await open_store(name), await open_store(name), await open_store(name)
    topic = TopicName.parse("persistent://public/default/t")
    url, http = "pulsar://127.0.0.1:6650", "http://127.0.0.1:8080"
    assert (await OwnershipCache(old_run, url, http).owner(topic, BOUNDARIES))["nativeUrl"] == url
    # the broker restarts with the same address while its old session is still alive
    restarted = OwnershipCache(new_run, url, http)
    assert (await restarted.owner(topic, BOUNDARIES))["nativeUrl"] == url
    await old_run.expire()  # the old run's session finally expires
    # the bundle is still owned (by the new run's session): another broker is redirected to it
    data = await OwnershipCache(other, "pulsar://127.0.0.1:6651", "http://127.0.0.1:8081",
                                probe=_alive).owner(topic, BOUNDARIES)
    assert data is not None and data["nativeUrl"] == url


async def _alive(url: str) -> bool:
    return True  # no broker listens in this test: take the owner for alive
