"""Helper process for the embedded-store crash tests, on a rocksdb:// store.

`batch N`: writes N nodes (and sequential ones), an ephemeral node, reports, waits to be killed.
`stream`: 8 concurrent tasks create nodes forever, printing each one once acknowledged."""

from __future__ import annotations

import sys

import trio

from metadata import open_store


async def batch(url: str, count: int) -> None:
    store = await open_store(url)
    await store.create("/durable", b"", make_parents=True)
    for i in range(count):
        await store.create(f"/durable/k{i:03d}", b"value-%d" % i)
        await store.create("/durable/s-", b"", sequential=True)
    await store.create("/eph", b"gone after the crash", ephemeral=True)
    print(f"written {count}", flush=True)
    await trio.sleep_forever()


async def stream(url: str) -> None:
    store = await open_store(url)
    await store.create("/stream", b"", make_parents=True)

    async def writer(w: int) -> None:
        i = 0
        while True:
            path = f"/stream/w{w}-{i:06d}"
            await store.create(path, b"x" * 200)
            await store.put("/stream", b"last %s" % path.encode())
            print("acked", path, flush=True)
            i += 1

    async with trio.open_nursery() as nursery:
        for w in range(8):
            nursery.start_soon(writer, w)


if __name__ == "__main__":
    if sys.argv[2] == "stream":
        trio.run(stream, sys.argv[1])
    else:
        trio.run(batch, sys.argv[1], int(sys.argv[3]))
