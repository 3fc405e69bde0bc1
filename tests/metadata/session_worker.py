"""Helper process for the session-timeout test: holds an ephemeral node with a short session,
reports a session loss and then re-creates the node under its new session."""

from __future__ import annotations

import sys

import trio

from metadata import open_store


async def main(url: str) -> None:
    store = await open_store(url, session_timeout_s=2.0, operation_timeout_s=5.0)
    lost = trio.Event()
    store.on_session_lost(lost.set)
    await store.create("/member", b"worker", ephemeral=True)
    print("ready", flush=True)
    await lost.wait()
    print("lost", flush=True)
    while True:
        try:
            await store.create("/member", b"worker again", ephemeral=True)
            break
        except Exception as exc:  # still reconnecting: retry
            print("retry", type(exc).__name__, flush=True)
            await trio.sleep(0.2)
    print("recreated", flush=True)
    await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
