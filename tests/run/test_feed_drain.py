"""The bounded stream behind a batch's outcomes and a run's events (`struckdown.feed`):
what is already waiting reaches the consumer without a trip through the event loop per
item, so a batch's workers do not queue behind a consumer that takes one item a loop
iteration (docs/performance.md, "the stream between the rows and their reader")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest

from struckdown.feed import fed


@pytest.mark.anyio
async def test_items_already_sent_reach_the_consumer_before_the_producer_goes_on() -> None:
    log: list[str] = []
    go, filled = anyio.Event(), anyio.Event()

    async def produce(send: Callable[[int], Awaitable[None]]) -> None:
        await send(0)
        await go.wait()
        for i in range(1, 7):
            if i == 5:
                filled.set()  # 1 to 4 wait in the stream; this send waits for room
            await send(i)
            log.append(f"sent {i}")

    stream = fed(produce, 4)
    assert await stream.__anext__() == 0
    go.set()
    await filled.wait()
    async for item in stream:
        log.append(f"got {item}")
    # the four waiting items come one after another, and only then does the producer's
    # 5th send go through. A checkpoint at each receive lets it in after the first
    assert log[:8] == ["sent 1", "sent 2", "sent 3", "sent 4", "got 1", "got 2", "got 3", "got 4"]
    assert sorted(log[8:]) == ["got 5", "got 6", "sent 5", "sent 6"]


@pytest.mark.anyio
async def test_the_producers_error_still_comes_after_every_item() -> None:
    async def produce(send: Callable[[int], Awaitable[None]]) -> None:
        for i in range(3):
            await send(i)
        raise ValueError("boom")

    got: list[int] = []
    with pytest.raises(ValueError, match="boom"):
        async for item in fed(produce, 8):
            got.append(item)
    assert got == [0, 1, 2]
