"""A slot's answer deadline (`max_seconds=`, issue 40 item 17): the model request is cancelled
when it passes, and the slot keeps what streamed so far as a truncated answer.

`sleep` is the clock the deadline waits on: anyio's, or a test's gate (never a real wait in a test).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from pydantic_ai.messages import ModelMessage

from ..notices import warn

T = TypeVar("T")

#: What the deadline waits on (a test replaces it with a gate it releases).
sleep: Callable[[float], Awaitable[Any]] = anyio.sleep


async def within(seconds: float | None, work: Callable[[], Awaitable[T]]) -> tuple[T | None, bool]:
    """(what `work()` returned, False), or (None, True) when `seconds` passed first and the
    work was cancelled. The work's own error is raised as it was (never inside a group)."""
    if seconds is None:
        return await work(), False
    result: list[T] = []
    hit = False

    async def timer(scope: anyio.CancelScope) -> None:
        nonlocal hit
        await sleep(seconds)
        hit = True
        scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(timer, tg.cancel_scope)
            result.append(await work())
            tg.cancel_scope.cancel()  # the timer is done with
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return (result[0], False) if result else (None, hit)


def slot_seconds(ceiling: float | None, asked: float | None, slot: str) -> float | None:
    """The host's `max_seconds`, lowered (never raised) by the slot's `max_seconds=`."""
    if asked is None:
        return ceiling
    if ceiling is not None and asked > ceiling:
        message = f"template asked for max_seconds={asked:g} but the caller's ceiling is {ceiling:g}; using {ceiling:g}"
        logging.getLogger("struckdown").warning("slot %s: %s", slot, message)
        warn(message)
        return ceiling
    return float(asked)


@dataclass
class CutRun:
    """What a slot run cut at its deadline leaves, in the shape of pydantic-ai's run result:
    the text that streamed before it, as a response cut at its limit (finish_reason 'length')."""

    output: str
    messages: list[ModelMessage]
    new: list[ModelMessage]
    usage: Any

    def all_messages(self) -> list[ModelMessage]:
        return self.messages

    def new_messages(self) -> list[ModelMessage]:
        return self.new


def cut_at_deadline(
    attempts: Any,
    spec: Any,
    seconds: float,
    streamer: Any,
    history: list[ModelMessage],
    user_prompt: Any,
    model: Any,
) -> CutRun:
    """The answer of an attempt that met `max_seconds`: a typed answer cannot be used
    (TruncatedError); free text keeps what streamed (`on_truncate` decides, as for max_tokens)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from ..models import model_label
    from ..models.errors import TruncatedError

    if not spec.is_text or attempts.on_truncate == "error":
        from .attempts import CUT_REFUSED, CUT_TYPED

        raise TruncatedError(
            model_label(model), CUT_REFUSED if spec.is_text else CUT_TYPED,
            what=f"the answer did not finish within max_seconds={seconds:g}",
            hint="raise max_seconds= (sd: --max-seconds), ask for a shorter answer, or use a faster model (fallback=)",
        )
    text = (streamer.accumulated + "".join(streamer.held)) if streamer is not None else ""
    new: list[ModelMessage] = []
    if user_prompt is not None:
        new.append(ModelRequest(parts=[UserPromptPart(user_prompt)]))
    new.append(ModelResponse(parts=[TextPart(text)], finish_reason="length", model_name=getattr(model, "model_name", None)))
    return CutRun(text, [*history, *new], new, attempts.usage)
