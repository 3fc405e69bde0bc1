"""Helper process for the cross-process tests: waits for a go-file, then creates sequential
nodes and allocates ledger ids on the store at URL, printing one result per line."""

from __future__ import annotations

import os
import sys

import trio

from metadata import open_store
from metadata.ledger_ids import allocate_ledger_id


async def main(url: str, go_file: str, count: int) -> None:
    store = await open_store(url)
    print("ready", flush=True)
    while not os.path.exists(go_file):
        await trio.sleep(0.01)
    for _ in range(count):
        print("seq", await store.create("/seq/n-", b"", sequential=True, make_parents=True), flush=True)
        print("ledger", await allocate_ledger_id(store), flush=True)
    await store.close()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
