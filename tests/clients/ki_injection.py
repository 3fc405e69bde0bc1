"""Run a client with SIGINT raised at one chosen point, in a child process of a test (a hang
then cannot take the test run with it), against the scripted fake broker served from a thread.

``python -m tests.clients.ki_injection MODE [quire args]``; MODE says what runs and where the
signal comes:

- ``cli ARGS``: the ``quire ARGS`` command; ``client``: a plain ``trio.run`` application of
  ``AsyncClient``. Both get SIGINT the first time the main thread schedules a connection's writer
  task: inside ``nursery.start_soon``, after the child joined the nursery and before it was
  scheduled; trio's default delivery raised KeyboardInterrupt there and left a child that never
  ran, its nursery waiting forever.
- ``client-enter``: inside ``AsyncClient.__aenter__`` after it opened its nursery (left open:
  trio's "Nursery stack corrupted").
- ``client-writer-parks``: in a connection's writer task as it parks (a writer that died there
  stayed its outbox's task to wake: trio's TrioInternalError when the outbox closed).

Prints ``interrupt raised in [...]`` on stderr, and for the client modes whether the client ended
with KeyboardInterrupt.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

import trio
from trio._core._run import Runner

from clients import AsyncClient
from quire.cli_errors import listen_to_ctrl_c
from quire.config import exception_leaves
from tests.clients.fake_broker import FakeBroker


def serve_fake_broker() -> FakeBroker:
    broker, ready = FakeBroker(), threading.Event()

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            ready.set()

    threading.Thread(target=trio.run, args=(serve,), daemon=True).start()
    ready.wait()
    return broker


def interrupt_at_writer_start(fired: list[str]) -> None:
    schedule = Runner.reschedule

    def reschedule(self: Runner, task: Any, *args: Any) -> None:
        if not fired and args == (None,) and task.name.endswith("ClientConnection._writer") and (
                threading.current_thread() is threading.main_thread()):
            fired.append(task.name)
            signal.raise_signal(signal.SIGINT)
        schedule(self, task, *args)

    Runner.reschedule = reschedule  # type: ignore[method-assign]


def interrupt_in_client_enter(fired: list[str]) -> None:
    """SIGINT inside ``AsyncClient.__aenter__`` after it opened its nursery."""
    import clients.async_client as module

    class Pool(module.ConnectionPool):
        def __init__(self, *args: Any) -> None:
            if not fired:
                fired.append("AsyncClient.__aenter__")
                signal.raise_signal(signal.SIGINT)
            super().__init__(*args)

    module.ConnectionPool = Pool  # type: ignore[misc]


def interrupt_as_writer_parks(fired: list[str]) -> None:
    """SIGINT in a connection's writer task just before it parks waiting for frames (its outbox
    already names it as the task to wake)."""
    park = trio.lowlevel.wait_task_rescheduled

    async def wait_task_rescheduled(abort_func: Any) -> Any:
        if not fired and trio.lowlevel.current_task().name.endswith("ClientConnection._writer"):
            fired.append("ClientConnection._writer parking")
            signal.raise_signal(signal.SIGINT)
        return await park(abort_func)

    trio.lowlevel.wait_task_rescheduled = wait_task_rescheduled


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    broker = serve_fake_broker()
    fired: list[str] = []
    if mode == "client-enter":
        interrupt_in_client_enter(fired)
    elif mode == "client-writer-parks":
        interrupt_as_writer_parks(fired)
    else:
        interrupt_at_writer_start(fired)
    listen_to_ctrl_c()  # (a test run started in the background inherits SIGINT ignored)
    try:
        if mode == "cli":
            from quire.cli import cli
            from quire.cli_errors import run

            run(cli, argv=[*args, "--url", broker.url])

        async def app() -> None:
            async with AsyncClient(broker.url) as client:
                consumer = await client.subscribe("t", "s")
                await consumer.receive()

        try:
            trio.run(app)
        except BaseException as exc:  # noqa: BLE001 - the interrupt is what we wait for
            if not any(isinstance(leaf, KeyboardInterrupt) for leaf in exception_leaves(exc)):
                raise
            print("the client ended with KeyboardInterrupt", file=sys.stderr)
    finally:
        print("interrupt raised in", fired, file=sys.stderr)


if __name__ == "__main__":
    main()
