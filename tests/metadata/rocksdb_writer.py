"""Helper process for the embedded-store crash test: writes nodes on a rocksdb:// store,
reports them, then waits to be killed."""

from __future__ import annotations

import sys

import trio

from metadata import open_store


async def main(url: str, count: int) -> None:
    store = await open_store(url)
    await store.create("/durable", b"", make_parents=True)
    for i in range(count):
        await store.create(f"/durable/k{i:03d}", b"value-%d" % i)
        await store.create("/durable/s-", b"", sequential=True)
    await store.create("/eph", b"gone after the crash", ephemeral=True)
    print(f"written {count}", flush=True)
    await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
