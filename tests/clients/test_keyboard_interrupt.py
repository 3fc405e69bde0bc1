"""Ctrl-C inside any task of a client ends the client: nothing swallows or outlives the interrupt.

trio raises KeyboardInterrupt in whichever task runs unprotected code when SIGINT lands (a
connection's reader dispatching a MESSAGE, the ack-group timer, the reconnect loop ...), not
only in the main task. Here it is raised once in the named task of a consuming and producing
client (against the scripted fake broker): ``async with AsyncClient`` must end with it, every
task of the client stopped, without waiting out its close timeout for tasks already gone.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest
import trio

from clients import AsyncClient
from clients.ack_grouping import AckGroupingTracker
from clients.consumer import Consumer
from clients.lookup import Backoff
from clients.protocol import commands
from clients.redelivery_tracker import RedeliveryTracker
from quire.config import exception_leaves
from quire.outbox import Outbox
from tests.clients.fake_broker import FakeBroker

TOPIC = "persistent://public/default/ki"

# task (the end of its trio name) -> the function called in it that the interrupt lands in
POINTS: dict[str, tuple[str, Any, str]] = {
    "reader": ("ClientConnection.run", Consumer, "_on_message"),
    "writer": ("ClientConnection._writer", Outbox, "_sent"),
    "keep-alive": ("ClientConnection._keep_alive", commands, "ping"),
    "ack timer": ("AckGroupingTracker.run", AckGroupingTracker, "flush"),
    "reconnect loop": ("ConnectionHandler.run", Backoff, "next"),
    "redelivery timer": ("Consumer._redelivery_timer", RedeliveryTracker, "pop_due"),
    "main task": ("", Consumer, "_on_dequeued"),
}


def interrupt_once_in(task_suffix: str, fn: Any, fired: list[str]) -> Any:
    """``fn`` that raises KeyboardInterrupt at its first call from a task named ``...task_suffix``."""
    def due() -> bool:
        name = trio.lowlevel.current_task().name
        if fired or not name.endswith(task_suffix):
            return False
        fired.append(name)
        return True

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if due():
                raise KeyboardInterrupt
            return await fn(*args, **kwargs)
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if due():
            raise KeyboardInterrupt
        return fn(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("point", list(POINTS))
async def test_keyboard_interrupt_in_any_client_task_ends_the_client(
    fake: FakeBroker, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, owner, attr = POINTS[point]
    fired: list[str] = []
    monkeypatch.setattr(owner, attr, interrupt_once_in(task, getattr(owner, attr), fired))
    cnx_before: set[Any] = set()
    with trio.fail_after(30):  # a guard against a hang
        start = trio.current_time()
        with pytest.raises(BaseException) as info:
            async with AsyncClient(fake.url, keep_alive_interval_seconds=0.05) as client:
                consumer = await client.subscribe(TOPIC, "sub", negative_ack_redelivery_delay_ms=30)
                producer = await client.create_producer(TOPIC, batching_enabled=False)
                cnx_before = set(client._pool._connections.values())
                for i in range(1_000_000):
                    await producer.send(b"%d" % i)
                    msg = await consumer.receive()
                    if i % 2:
                        await consumer.negative_acknowledge(msg)
                    else:
                        await consumer.acknowledge(msg)
                    if i == 3:
                        fake.drop_connections()  # starts the reconnect loop
                    await trio.sleep(0.01)
    # It used to wait out its 10 s close timeout when the interrupt had already stopped the
    # reconnect loop of a producer with a send pending (the ack-timer case); it takes a fraction
    # of a second now (a bound far from both, not a speed check).
    assert trio.current_time() - start < 8
    assert fired, f"the interrupt was never raised in {task}"
    assert any(isinstance(leaf, KeyboardInterrupt) for leaf in exception_leaves(info.value)), info.value
    assert all(cnx.closed.is_set() for cnx in cnx_before)



def test_ctrl_c_while_a_connection_starts_its_tasks_ends_a_trio_application() -> None:
    # A plain trio.run (not the CLI's restricted one): the client's own KI protection must keep
    # the interrupt out of trio's nursery.start_soon (see tests/clients/ki_injection.py).
    from tests.cli.test_ctrl_c_in_trio_internals import run_interrupted

    code, err = run_interrupted("client")
    assert code == 0 and "the client ended with KeyboardInterrupt" in err, err


def test_ctrl_c_while_the_client_opens_its_nursery_ends_a_trio_application() -> None:
    from tests.cli.test_ctrl_c_in_trio_internals import run_interrupted

    code, err = run_interrupted("client-enter", expect="AsyncClient.__aenter__")
    assert code == 0 and "the client ended with KeyboardInterrupt" in err, err
    assert "corrupted" not in err, err


def test_ctrl_c_as_a_connection_writer_parks_ends_a_trio_application() -> None:
    from tests.cli.test_ctrl_c_in_trio_internals import run_interrupted

    code, err = run_interrupted("client-writer-parks", expect="ClientConnection._writer parking")
    assert code == 0 and "the client ended with KeyboardInterrupt" in err, err
    assert "TrioInternalError" not in err, err
