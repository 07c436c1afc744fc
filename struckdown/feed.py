"""One producer task feeding an async generator through a bounded stream.

An async generator cannot keep a task group open across its `yield`s (its consumer may
resume it from another task), so the work that produces the items runs as the one
task the generator owns. The bounded stream between them lets a slow consumer hold
the producer back instead of letting items pile up; closing the generator cancels the
task and everything it started. Used for a run's events (`run.events`) and a batch's
outcomes (`batch.outcomes`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def fed(produce: Callable[[Callable[[T], Awaitable[None]]], Awaitable[None]], buffer: int) -> AsyncGenerator[T, None]:
    """The items `produce(send)` sends, as they come; its error, if it fails, after them."""
    send, receive = anyio.create_memory_object_stream[T](max(1, buffer))

    async def main() -> None:
        async with send:
            await produce(send.send)

    task = asyncio.create_task(main())
    try:
        async with receive:
            async for item in receive:
                yield item
                del item  # a finished item is not kept alive by this frame
                # what else is waiting is taken without a checkpoint each (anyio's `receive`
                # makes one an item): a consumer that takes one item a loop iteration lets
                # the stream fill, and the producer's tasks wait on it (a batch then runs
                # fewer rows at once, at more CPU a row: docs/performance.md)
                while True:
                    try:
                        item = receive.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):  # none yet, or the end: `async for` sees which
                        break
                    yield item
                    del item
        await task
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # a consumer that stopped at the error's event has seen it: no "never retrieved"
        elif not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        elif not task.cancelled():
            # the consumer left after the error arrived as an item (the engine sends it as an
            # event, then raises): taken here, so asyncio prints no "Task exception was never retrieved"
            task.exception()
