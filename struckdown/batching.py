"""The rows of a batch on this event loop, holding no more than the rows in flight.

`run_rows` is the local batch: `concurrency` workers share one iterator over the
contexts (a plain or an async iterable, read one row at a time as a worker is free),
run each row and hand `(index, outcome)` to `emit` as it finishes. Nothing here
keeps a finished row: `Environment.complete_batch_async` collects them into the list
it returns, `Environment.complete_batch_iter_async` passes them on as they come
(`outcomes`), so a batch of any length runs in the memory of its rows in flight.

No task per row and no global semaphore: the workers are the concurrency.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio

Row = tuple[int, Mapping[str, Any]]
NextRow = Callable[[], Awaitable[Row | None]]
Emit = Callable[[int, Any], Awaitable[None]]


def shared_rows(contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]]) -> NextRow:
    """One `next_row()` for every worker: the next `(index, context)`, or None at the end.
    An async iterable is advanced by one worker at a time (an async generator must
    not be entered twice at once)."""
    if isinstance(contexts, AsyncIterable):
        iterator = contexts.__aiter__()
        numbers = itertools.count()
        lock = anyio.Lock()
        finished = False

        async def next_async_row() -> Row | None:
            nonlocal finished
            async with lock:
                if finished:
                    return None
                try:
                    context = await iterator.__anext__()
                except StopAsyncIteration:
                    finished = True
                    return None
                return next(numbers), context

        return next_async_row
    rows = iter(enumerate(contexts))

    async def next_row() -> Row | None:
        return next(rows, None)

    return next_row


async def run_rows(
    next_row: NextRow,
    run_row: Callable[[Mapping[str, Any]], Awaitable[Any]],
    concurrency: int,
    emit: Emit,
) -> None:
    """Run every row with `concurrency` workers; a row that raises is emitted as its
    exception and the others go on. Returns when every row has been emitted."""

    async def worker() -> None:
        while (item := await next_row()) is not None:
            index, context = item
            try:
                outcome: Any = await run_row(context)
            except Exception as exc:  # noqa: BLE001 - recorded per row
                outcome = exc
            del item, context
            await emit(index, outcome)
            del outcome  # a finished row is not kept alive by its worker

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, concurrency)):
            tg.start_soon(worker)


def callback_emitter(on_result: Callable[[int, Any], Any] | None, keep: Callable[[int, Any], None] | None) -> Emit:
    """`emit` for `complete_batch_async`: store the outcome (`keep`), then call
    `on_result` (a function or a coroutine function)."""

    async def emit(index: int, outcome: Any) -> None:
        if keep is not None:
            keep(index, outcome)
        if on_result is not None:
            maybe = on_result(index, outcome)
            if asyncio.iscoroutine(maybe):
                await maybe

    return emit


async def outcomes(start: Callable[[Emit], Awaitable[None]], buffer: int) -> AsyncGenerator[tuple[int, Any], None]:
    """The `(index, outcome)` pairs `start(emit)` emits, as they come.

    The batch is the one task this generator owns (an async generator cannot keep a
    task group open across its `yield`s, since its consumer may resume it from
    another task); a bounded stream between them lets a slow consumer hold the
    batch back instead of letting outcomes pile up. Closing the generator cancels
    every row in flight."""
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](max(1, buffer))

    async def emit(index: int, outcome: Any) -> None:
        await send.send((index, outcome))

    async def main() -> None:
        async with send:
            await start(emit)

    task = asyncio.create_task(main())
    try:
        async with receive:
            async for pair in receive:
                yield pair
                del pair
        await task
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


def accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` takes the keyword `name` (an executor written before it existed may not)."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
