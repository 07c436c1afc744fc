"""The two ways to consume the engine: `events()` hands a run's events out through a
bounded stream, `run_to_result()` drains the same run in place (no stream, no task)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from ..feed import fed
from ..incremental import ProcessingComplete
from ..media.scope import media_scope
from ..observe import run_span
from ..plan import Program
from ..results import Result
from .engine import Run
from .settings import RunSettings

#: Events a run may have produced ahead of a slow consumer before it waits for it.
EVENT_BUFFER = 256


async def run_to_result(program: Program, context: Mapping[str, Any] | None, options: RunSettings) -> Result:
    """The same engine as `events()`, consumed in place: no stream, no extra task."""
    final: list[Result] = []

    async def keep_result(event: Any) -> None:
        if isinstance(event, ProcessingComplete):
            final.append(event.result)

    run = Run(program, dict(context or {}), options, keep_result)
    with media_scope(options.options["image_max_side"], options.options["max_images"]), run_span(options.tracing, program):
        await run.main()
    paused = final[0].paused
    if isinstance(paused, BaseException):
        raise paused  # SPEC §12: complete() raises Paused; the incremental API yields it
    return final[0]


def events(program: Program, context: Mapping[str, Any] | None, options: RunSettings) -> AsyncGenerator[Any, None]:
    """The event stream of one run, through a bounded stream (a slow consumer holds
    the run back instead of letting events pile up). Closing it cancels everything
    the run started.

    Everything inside the run is anyio (task groups, cancel scopes, events); the run
    itself is the one task the stream owns (`feed.fed`)."""

    async def produce(send: Callable[[Any], Awaitable[None]]) -> None:
        run = Run(program, dict(context or {}), options, send)
        with run_span(options.tracing, program), media_scope(options.options["image_max_side"], options.options["max_images"]):
            await run.main()

    return fed(produce, EVENT_BUFFER)
