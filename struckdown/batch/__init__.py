"""The rows of a batch, holding no more than the rows in flight.

A `BatchCall` is one call of `complete_batch_async` / `complete_batch_iter_async`
after its checks: the Program, the contexts, and where the rows run. Its `run(emit)`
hands `(index, outcome)` to `emit` as each row finishes, on this event loop
(`run_rows`: `concurrency` workers share one iterator over the contexts, a plain or
an async iterable, read one row at a time as a worker is free) or on an executor.
Around the local rows: provider batching (SPEC §15), the batch's budget (§13) and
its MCP sessions (§16). Nothing here keeps a finished row: `collected` gathers them
into the list `complete_batch_async` returns, `outcomes` passes them on as they come
(`complete_batch_iter_async`), so a batch of any length runs in the memory of its
rows in flight.

No task per row and no global semaphore: the workers are the concurrency.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import anyio

from ..feed import fed

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
    run_row: Callable[[int, Mapping[str, Any]], Awaitable[Any]],
    concurrency: int,
    emit: Emit,
    around_worker: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> None:
    """Run every row with `concurrency` workers; a row that raises is emitted as its
    exception and the others go on. Returns when every row has been emitted.
    `around_worker()` is entered by each worker for its whole life."""

    async def worker() -> None:
        with around_worker():
            while (item := await next_row()) is not None:
                index, context = item
                try:
                    outcome: Any = await run_row(index, context)
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


def outcomes(start: Callable[[Emit], Awaitable[None]], buffer: int) -> AsyncGenerator[tuple[int, Any], None]:
    """The `(index, outcome)` pairs `start(emit)` emits, as they come. The batch is the one
    task the stream owns (`feed.fed`): a slow consumer holds the batch back instead of
    letting outcomes pile up, and closing the generator cancels every row in flight."""

    async def produce(send: Callable[[tuple[int, Any]], Awaitable[None]]) -> None:
        async def emit(index: int, outcome: Any) -> None:
            await send((index, outcome))

        await start(emit)

    return fed(produce, buffer)


def accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` takes the keyword `name` (an executor written before it existed may not)."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


@dataclass(frozen=True)
class BatchCall:
    """One checked batch call: what runs, over what, and where (see the module's text)."""

    environment: Any  # the Environment (typed loosely: environment imports this module)
    program: Any
    contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]]
    concurrency: int
    options: Any
    executor: Any = None
    batching: Any = None  # a ProviderBatch, or None
    batch_limits: Any = None

    @classmethod
    def of(
        cls, environment: Any, program: Any, contexts: Any, concurrency: int, options: Any,
        executor: Any, provider_batch: Any, batch_limits: Any,
    ) -> BatchCall:
        """The job, checked before any row: provider batching needs this event loop and
        a model with a batch API; an executor takes a plain iterable."""
        batching = None
        if provider_batch is not None and provider_batch is not False:
            from .provider import provider_batch_of

            batching = provider_batch_of(provider_batch)
        if batching is not None and executor is not None:
            raise ValueError("provider_batch runs the rows on this event loop: it cannot be combined with executor=")
        if executor is not None and isinstance(contexts, AsyncIterable):
            raise TypeError("a batch on an executor takes an iterable of contexts, not an async iterable")
        if batching is not None:
            batching.check(environment, program, options, concurrency, contexts)
        return cls(environment, program, contexts, concurrency, options, executor, batching, batch_limits)

    async def run(self, emit: Emit) -> None:
        """Every row, each handed to `emit` as it finishes; nothing kept."""
        if self.executor is not None:
            await self._on_executor(emit, collect=False)
        else:
            await self._here(emit)

    async def _here(self, emit: Emit) -> None:
        from ..run.accounting import batch_budget
        from ..run.settings import request_limiter

        environment, program = self.environment, self.program
        requests = request_limiter(self.options.get("max_requests"))  # one cap for every row
        budget, options = batch_budget(environment, program, self.options, self.batch_limits)  # max_cost: the batch's
        batching = self.batching

        async with environment._mcp_sessions(program, options) as sessions:  # one session per server
            # the same for every row: built once, not per row
            settings = environment.run_settings(
                options, stream=False, requests=requests, mcp=sessions, provider_batch=batching, batch=budget
            )

            async def run_row(index: int, context: Mapping[str, Any]) -> Any:
                spent = budget.spent() if budget is not None else None  # once spent, no new row starts
                if spent is not None:
                    return spent
                from ..run.slot_run import enter_row

                # SPEC §25: effect ids name the row (sd batch's RowContext: the input row)
                enter_row(getattr(context, "row", index))
                with batching.row(index) if batching is not None else nullcontext():
                    return await environment._complete_row(
                        program, context, options, requests, batching, sessions, budget, settings=settings
                    )

            around = batching.worker if batching is not None else nullcontext
            session = batching.session(requests) if batching is not None else nullcontext()
            async with session:
                await run_rows(shared_rows(self.contexts), run_row, self.concurrency, emit, around)

    async def _on_executor(self, emit: Callable[[int, Any], Any] | None, collect: bool) -> list[Any]:
        """The rows on the executor, which calls `emit` (awaiting what it returns); with
        `collect=False` (when it accepts that keyword) it keeps no finished row."""
        options = self.options
        kwargs: dict[str, Any] = {k: v for k, v in options.items() if k not in ("template_path", "include_paths")}
        if self.batch_limits is not None:
            kwargs["batch_limits"] = self.batch_limits
        if not collect and accepts_keyword(self.executor.run_batch, "collect"):
            kwargs["collect"] = False
        outcomes: list[Any] = await self.executor.run_batch(
            self.program.template.source,
            self.contexts,
            concurrency=self.concurrency,
            on_result=emit,
            template_path=options.get("template_path"),
            include_paths=options.get("include_paths", self.environment.include_paths),
            **kwargs,
        )
        return outcomes


async def collected(job: BatchCall, on_result: Callable[[int, Any], Any] | None) -> list[Any]:
    """Every outcome of `job` in input order (`on_result` called as each row finishes)."""
    results: list[Any] = []

    def keep(index: int, outcome: Any) -> None:
        results.extend([None] * (index + 1 - len(results)))
        results[index] = outcome

    if job.executor is not None:  # the executor keeps its own list (in input order) and calls on_result
        return await job._on_executor(on_result, collect=True)
    await job.run(callback_emitter(on_result, keep))
    return results
