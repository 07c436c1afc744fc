"""Sync wrappers over the async engine that also work inside a running event loop
(Jupyter, web frameworks): there the run gets a fresh loop in a worker thread."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())  # type: ignore[arg-type]
    from .notices import hand_over_caller

    box: dict[str, Any] = {}
    context = hand_over_caller()  # the run's warnings name the caller's line, not the template's

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, factory())  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="struckdown-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


_DONE = object()


class _Raise:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def iterate_sync(factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Sync, truly incremental iteration: each item reaches the caller when it happens.

    The async iterator lives on its own loop in a worker thread; leaving the loop
    early (break, close, garbage collection) cancels it and waits for the thread.
    """
    items: queue.Queue[Any] = queue.Queue()
    loop_box: dict[str, Any] = {}
    ready = threading.Event()

    async def pump() -> None:
        loop_box["task"] = asyncio.current_task()
        loop_box["loop"] = asyncio.get_running_loop()
        ready.set()
        try:
            async for item in factory():
                items.put(item)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            items.put(_Raise(exc))
        finally:
            items.put(_DONE)

    def generate() -> Iterator[T]:
        thread = threading.Thread(target=lambda: asyncio.run(pump()), name="struckdown-events", daemon=True)
        thread.start()
        ready.wait()
        try:
            while True:
                item = items.get()
                if item is _DONE:
                    break
                if isinstance(item, _Raise):
                    raise item.error
                yield item
        finally:
            loop, task = loop_box["loop"], loop_box["task"]
            if thread.is_alive():
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:
                    pass  # loop already closed
            thread.join()

    return generate()
