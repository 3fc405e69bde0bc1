"""Consumer churn with the official client against a real ``quire standalone`` (issue 10,
item 1): after consumers come and go without acking, the next consumer must receive every
unacknowledged message from the start, in order, so that its cumulative ack covers only
messages it received."""

from __future__ import annotations

import uuid

import pulsar
import pytest

from tests.e2e.conftest import Standalone

CT = pulsar.ConsumerType
N = 500


@pytest.mark.parametrize("sub_type", [CT.Exclusive, CT.Failover], ids=["exclusive", "failover"])
def test_next_consumer_gets_unacked_messages_in_order_after_churn(standalone: Standalone,
                                                                 sub_type: pulsar.ConsumerType) -> None:
    client = standalone.client()
    try:
        for round_ in range(8):
            t = f"persistent://public/default/churn-{uuid.uuid4().hex[:8]}"
            sub = client.subscribe(t, "s", consumer_type=sub_type)
            producer = client.create_producer(t, batching_enabled=False, block_if_queue_full=True)
            for i in range(N):
                producer.send_async(str(i).encode(), None)
            producer.flush()
            producer.close()
            # 1st consumer: reads everything, acks nothing, closes.
            got = [int(sub.receive(timeout_millis=10_000).data()) for _ in range(N)]
            assert got == list(range(N))
            sub.close()
            # 2nd consumer: reads one message (its receiver queue is filled meanwhile), closes.
            second = client.subscribe(t, "s", consumer_type=sub_type)
            assert int(second.receive(timeout_millis=10_000).data()) == 0
            second.close()
            # 3rd consumer: reads to the end, acking cumulatively as it goes.
            third = client.subscribe(t, "s", consumer_type=sub_type)
            received: list[int] = []
            while not received or received[-1] != N - 1:
                m = third.receive(timeout_millis=10_000)
                received.append(int(m.data()))
                third.acknowledge_cumulative(m)
            third.close()
            # Nothing was acked before the 3rd consumer, so it must have received every
            # message, in order, before its cumulative ack on the last one.
            assert received == list(range(N)), f"round {round_}: {_runs(received)}"
    finally:
        client.close()


def _runs(xs: list[int]) -> list[tuple[int, int]]:
    """[0, 1, 2, 7, 8] -> [(0, 2), (7, 8)]: a short picture of what was received."""
    out: list[tuple[int, int]] = []
    for x in xs:
        if out and out[-1][1] + 1 == x:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return out
