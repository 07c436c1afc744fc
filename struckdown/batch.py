"""A batch on this process's event loop: workers share one iterator over the rows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .environment import Environment, RunOptions
    from .plan import Program
    from .results import Result


async def run_local_batch(
    env: Environment,
    program: Program,
    contexts: Iterable[Mapping[str, Any]],
    concurrency: int,
    on_result: Callable[[int, Result | BaseException], Any] | None,
    options: RunOptions,
) -> list[Result | BaseException]:
    """Rows in input order; a failing row is its exception and the others go on.
    Concurrency belongs to this batch alone (no task per row, no global semaphore)."""
    import anyio

    results: list[Result | BaseException | None] = []
    rows = iter(enumerate(contexts))

    async def worker() -> None:
        for index, context in rows:
            results.extend([None] * (index + 1 - len(results)))
            try:
                outcome: Result | BaseException = await env.complete_async(program, context, **options)
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
