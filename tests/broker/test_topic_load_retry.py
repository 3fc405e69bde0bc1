"""A topic whose managed-ledger open fails for a while (bookies briefly short) is retried
with back-off inside the one load: every client asking meanwhile waits for it and gets the
topic, instead of each failing in turn."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from broker.names import TopicName
from managed_ledger.errors import ManagedLedgerError
from tests.broker.conftest import start_broker
from tests.broker.memory_ml import MemoryManagedLedger, MemoryManagedLedgerFactory


class FlakyFactory(MemoryManagedLedgerFactory):
    """Opens fail (as a recovery or ledger creation without enough bookies does) ``failures`` times."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    async def open(self, name: str, config: Any = None) -> MemoryManagedLedger:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ManagedLedgerError(f"{name}: cannot create a ledger: not enough bookies")
        return await super().open(name, config)


async def test_a_failing_ledger_open_is_retried_within_one_load(nursery: trio.Nursery) -> None:
    service = await start_broker(nursery)
    flaky = FlakyFactory(failures=3)
    service.factory = flaky
    name = TopicName.parse("persistent://public/default/flaky")
    got: list[Any] = []

    async def client() -> None:
        got.append(await service.get_topic(name))

    with trio.fail_after(20):
        async with trio.open_nursery() as clients:
            for _ in range(3):  # three clients at once: one load, retried, serves all three
                clients.start_soon(client)
    assert flaky.attempts == 4 and len(got) == 3 and got[0] is got[1] is got[2]


async def test_a_load_gives_up_after_topic_load_timeout(nursery: trio.Nursery) -> None:
    service = await start_broker(nursery, topic_load_timeout_seconds=0.5)
    service.factory = FlakyFactory(failures=1000)
    with trio.fail_after(10), pytest.raises(ManagedLedgerError):
        await service.get_topic(TopicName.parse("persistent://public/default/never"))
