"""A process that owns one managed ledger, for kill/fencing tests.

Usage: ``python -m tests.managed_ledger.ml_driver ZK_URL NAME [CONFIG_JSON]``. It opens the
managed ledger and a durable cursor ``sub`` (earliest), prints ``{"ready": ...}``, then runs
one JSON command per stdin line and answers with one JSON line on stdout:
``{"op": "add", "n": N}`` (N pipelined adds) -> ``{"positions": ["L:E", ...]}``;
``{"op": "mark_delete", "position": "L:E"[, "properties": {...}]}`` /
``{"op": "delete", "positions": [...][, "ack_sets": {"L:E": [words]}]}`` ->
``{"ok": true}`` once persisted (with ``throttle_mark_delete`` set, once accepted: a
throttled position stays dirty); ``{"op": "flush"}`` persists a dirty position ->
``{"ok": true}``; ``{"op": "stats"}`` -> the managed ledger's internal stats. Errors come
back as ``{"error": "<ExceptionType>"}``.
"""

from __future__ import annotations

import json
import sys

import trio

import metadata
from bookie.client.bookkeeper import BookKeeper
from bookie.client.config import ClientConfig
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory, Position


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main(zk_url: str, name: str, config_json: str) -> None:
    config = ManagedLedgerConfig(**json.loads(config_json))
    store = await metadata.open_store(zk_url)
    async with BookKeeper(store, ClientConfig()) as bk:
        with trio.fail_after(20):
            while not await bk.writable_bookies():
                await trio.sleep(0.05)
        async with ManagedLedgerFactory(store, bk, config) as factory:
            ml = await factory.open(name)
            cursor = await ml.open_cursor("sub", "earliest")
            emit({"ready": str(ml.last_confirmed_entry)})
            stdin = trio.wrap_file(sys.stdin)
            async for line in stdin:
                cmd = json.loads(line)
                try:
                    if cmd["op"] == "add":
                        out: list[Position | None] = [None] * cmd["n"]

                        async def add(i: int) -> None:
                            out[i] = await ml.add_entry(b"entry-%06d" % i)

                        async with trio.open_nursery() as n:
                            for i in range(cmd["n"]):
                                n.start_soon(add, i)
                        emit({"positions": [str(p) for p in sorted(p for p in out if p is not None)]})
                    elif cmd["op"] == "mark_delete":
                        await cursor.mark_delete(Position.parse(cmd["position"]), cmd.get("properties"))
                        emit({"ok": True})
                    elif cmd["op"] == "delete":
                        ack_sets = {Position.parse(p): words for p, words in cmd.get("ack_sets", {}).items()}
                        await cursor.delete([Position.parse(p) for p in cmd["positions"]], ack_sets or None)
                        emit({"ok": True})
                    elif cmd["op"] == "flush":
                        await cursor.flush()
                        emit({"ok": True})
                    elif cmd["op"] == "stats":
                        emit(ml.internal_stats())
                    else:
                        emit({"error": f"unknown op {cmd['op']}"})
                except BaseExceptionGroup as eg:
                    emit({"error": type(eg.exceptions[0]).__name__})
                except Exception as e:
                    emit({"error": type(e).__name__})
    await store.close()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "{}")
