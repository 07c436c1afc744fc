"""The public entry points (SPEC §5). All of them drive the one engine in run/engine.py."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from .compile import Program, parse
from .results import Result
from .run.engine import RunOptions, events, run_to_result

T = TypeVar("T")


class BatchExecutor(Protocol):
    """Where the rows of a batch run. The default (None) is this process's event loop."""

    async def run_batch(
        self,
        template: str,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int,
        on_result: Callable[[int, Result | BaseException], Any] | None,
        template_path: PathLike | None,
        include_paths: Sequence[PathLike],
        **kwargs: Any,
    ) -> list[Result | BaseException]: ...
PathLike = str | os.PathLike[str]


def _program(template: str | Program, template_path: PathLike | None, include_paths: Sequence[PathLike]) -> Program:
    if isinstance(template, Program):
        return template
    return parse(template, template_path=template_path, include_paths=include_paths)


def _options(
    *,
    model: Any,
    tools: Sequence[Any],
    deps: Any,
    limits: Any,
    on_halt: str,
    settings: Mapping[str, Any] | None,
    cache: Any,
    stop_at: str | None,
    stream: bool,
) -> RunOptions:
    if on_halt not in ("raise", "return"):
        raise ValueError(f"on_halt must be 'raise' or 'return', not {on_halt!r}")
    return RunOptions(model, tuple(tools), deps, limits, on_halt, settings, cache, stop_at, stream)


async def complete_incremental_async(
    template: str | Program,
    context: Mapping[str, Any] | None = None,
    *,
    stream: bool = True,
    model: Any = None,
    tools: Sequence[Any] = (),
    deps: Any = None,
    deps_type: Any = None,
    limits: Any = None,
    on_halt: str = "raise",
    settings: Mapping[str, Any] | None = None,
    cache: Any = None,
    template_path: PathLike | None = None,
    include_paths: Sequence[PathLike] = (),
    stop_at: str | None = None,
) -> AsyncGenerator[Any, None]:
    """Run a template and yield its events as they happen (SPEC §6).

    Closing the generator (`await gen.aclose()`) or cancelling the consuming task
    cancels every in-flight model call, tool and guard.
    """
    program = _program(template, template_path, include_paths)
    options = _options(
        model=model, tools=tools, deps=deps, limits=limits, on_halt=on_halt,
        settings=settings, cache=cache, stop_at=stop_at, stream=stream,
    )
    stream_of_events = events(program, context, options)
    try:
        async for event in stream_of_events:
            yield event
    finally:
        await stream_of_events.aclose()


async def complete_async(
    template: str | Program,
    context: Mapping[str, Any] | None = None,
    *,
    model: Any = None,
    tools: Sequence[Any] = (),
    deps: Any = None,
    deps_type: Any = None,
    limits: Any = None,
    on_halt: str = "raise",
    settings: Mapping[str, Any] | None = None,
    cache: Any = None,
    template_path: PathLike | None = None,
    include_paths: Sequence[PathLike] = (),
    stop_at: str | None = None,
) -> Result:
    """Run a template to the end and return its Result."""
    program = _program(template, template_path, include_paths)
    options = _options(
        model=model, tools=tools, deps=deps, limits=limits, on_halt=on_halt,
        settings=settings, cache=cache, stop_at=stop_at, stream=False,
    )
    return await run_to_result(program, context, options)


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, also inside a running event loop
    (Jupyter, web frameworks): then it runs on a fresh loop in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="struckdown-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def complete(template: str | Program, context: Mapping[str, Any] | None = None, **kwargs: Any) -> Result:
    """Sync `complete_async`; works inside a running event loop too."""
    return run_sync(lambda: complete_async(template, context, **kwargs))


_DONE = object()


def complete_incremental(
    template: str | Program, context: Mapping[str, Any] | None = None, **kwargs: Any
) -> Iterator[Any]:
    """Sync, truly incremental events: each event reaches the caller when it happens.

    The run lives on its own loop in a worker thread; leaving the loop early (break,
    close, garbage collection) cancels the run and waits for the thread to end.
    """
    events_q: queue.Queue[Any] = queue.Queue()
    loop_box: dict[str, Any] = {}
    ready = threading.Event()

    async def pump() -> None:
        loop_box["task"] = asyncio.current_task()
        loop_box["loop"] = asyncio.get_running_loop()
        ready.set()
        try:
            async for event in complete_incremental_async(template, context, **kwargs):
                events_q.put(event)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            events_q.put(_Raise(exc))
        finally:
            events_q.put(_DONE)

    thread = threading.Thread(target=lambda: asyncio.run(pump()), name="struckdown-events", daemon=True)
    thread.start()
    ready.wait()
    try:
        while True:
            item = events_q.get()
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


class _Raise:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def complete_batch_async(
    template: str | Program,
    contexts: Iterable[Mapping[str, Any]],
    *,
    concurrency: int = 8,
    on_result: Callable[[int, Result | BaseException], Any] | None = None,
    template_path: PathLike | None = None,
    include_paths: Sequence[PathLike] = (),
    executor: BatchExecutor | None = None,
    **kwargs: Any,
) -> list[Result | BaseException]:
    """Run one template over many contexts; results in input order.

    A failing row is returned as its exception; the other rows go on. The
    template is parsed once. Concurrency belongs to this batch alone.
    `executor=None` runs the rows here on asyncio; another executor (e.g.
    `struckdown.distributed.DaskExecutor`) receives the template text and the
    row contexts and must honour the same contract.
    """
    import anyio

    program = _program(template, template_path, include_paths)
    if executor is not None:
        return await executor.run_batch(
            program.template.source,
            contexts,
            concurrency=concurrency,
            on_result=on_result,
            template_path=template_path,
            include_paths=include_paths,
            **kwargs,
        )
    results: list[Result | BaseException | None] = []
    rows = iter(enumerate(contexts))

    async def worker() -> None:
        for index, context in rows:  # workers share one iterator: no task per row
            results.extend([None] * (index + 1 - len(results)))
            try:
                outcome: Result | BaseException = await complete_async(program, context, **kwargs)
            except Exception as exc:  # noqa: BLE001 - recorded per row
                outcome = exc
            results[index] = outcome
            if on_result is not None:
                maybe = on_result(index, outcome)
                if asyncio.iscoroutine(maybe):
                    await maybe

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, concurrency)):
            tg.start_soon(worker)
    return results  # type: ignore[return-value]


def complete_batch(
    template: str | Program, contexts: Iterable[Mapping[str, Any]], **kwargs: Any
) -> list[Result | BaseException]:
    """Sync `complete_batch_async`."""
    return run_sync(lambda: complete_batch_async(template, contexts, **kwargs))
