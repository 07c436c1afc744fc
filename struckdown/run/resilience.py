"""Resilient slots (SPEC §14): retries, fallback models, truncation, tool choice, order.

Two layers, so that each does what it can see:

* **Retries** live in a model wrapper, `RetryingModel`, around the model a slot runs on
  (below the response cache, above the budgets' per-request meter): a transient
  provider failure (`model_errors.is_transient`) is sent again after an exponential
  backoff with full jitter, honouring `Retry-After`, and yields `SlotRetry`. A stream
  that fails after it produced tokens is retracted (`SlotRetracted(slot, "retry")`) and
  started again, so the consumer's `accumulated` text begins from empty. pydantic-ai's
  own attempt loop (`RetryModelRequest`, `ModelFallback`) stops at the first streamed
  event, which is why this is a wrapper and not a capability. The provider SDK's own
  retries are turned off per request (`max_retries=0`) so attempts never multiply.
* **Fallback** lives in the slot run (`SlotAttempts`): when a slot ends without a valid
  answer on one model (a provider failure after its retries, a tool loop at its limit,
  answers that failed validation every time, an answer that was cut off and cannot be
  used) the whole slot starts again on the next model, with the full ceiling, from the
  slot's original request (plus the turn `A previous attempt could not finish: …` when
  the model, not the provider, failed). pydantic-ai's `ModelFallback`/`FallbackModel`
  switch models per request inside one run, which can neither restart the tool loop
  with a fresh ceiling nor add that turn; a `FallbackModel` passed as `model=` still
  works as any model does.

Everything a slot run needs travels in `CURRENT_RETRIES` (set around `agent.run`), so
the wrapper is stateless and cached per model, like the response-cache wrapper.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import anyio
from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponseStreamEvent
from pydantic_ai.models import StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from ..errors import ConfigurationError, StruckdownError, TemplateRuntimeError
from ..incremental import SlotFallback, SlotRetry
from ..model_errors import ModelError, TruncatedError, is_transient, map_model_error
from ..slot_options import TOOL_CHOICES, default_max_tokens
from .streams import Request, SlotRunWrapper, StreamContext

DEFAULT_RETRIES = 3
DEFAULT_RETRY_BASE_DELAY = 1.0
DEFAULT_RETRY_MAX_DELAY = 30.0

HINT_TURN = "A previous attempt could not finish: {reason}."

Emit = Callable[[Any], Awaitable[None]]
T = TypeVar("T")


# -- settings -------------------------------------------------------------------
@dataclass(frozen=True)
class Resilience:
    """A run's retry and fallback settings (the call's keywords over the Environment's)."""

    retries: int = DEFAULT_RETRIES
    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY
    fallback: tuple[Any, ...] = ()  # models (or model strings) tried in order after the slot's own
    on_truncate: str = "keep"
    observer: Callable[[Any], Any] | None = field(default=None, compare=False)  # on_retry=: sees SlotRetry/SlotFallback

    @classmethod
    def of(
        cls,
        retries: int | None = None,
        retry_base_delay: float | None = None,
        retry_max_delay: float | None = None,
        fallback: Any = None,
        on_truncate: str | None = None,
        observer: Callable[[Any], Any] | None = None,
    ) -> Resilience:
        """Checked settings; None means the default (`retries`: STRUCKDOWN_MAX_RETRIES, else 3)."""
        if retries is None:
            from ..models import max_retries

            retries = max_retries() if os.environ.get("STRUCKDOWN_MAX_RETRIES") else DEFAULT_RETRIES
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a whole number of at least 0, not {retries!r}")
        base = _seconds("retry_base_delay", DEFAULT_RETRY_BASE_DELAY if retry_base_delay is None else retry_base_delay)
        top = _seconds("retry_max_delay", DEFAULT_RETRY_MAX_DELAY if retry_max_delay is None else retry_max_delay)
        if on_truncate is None:
            on_truncate = "keep"
        if on_truncate not in ("keep", "error"):
            raise ValueError(f"on_truncate must be 'keep' or 'error', not {on_truncate!r}")
        models: tuple[Any, ...]
        if fallback is None:
            models = ()
        elif isinstance(fallback, str):
            models = tuple(m.strip() for m in fallback.split(",") if m.strip())
        elif isinstance(fallback, Sequence):
            models = tuple(fallback)
        else:
            models = (fallback,)
        if observer is not None and not callable(observer):
            raise ValueError(f"on_retry must be a function of one event, not {observer!r}")
        if not models and observer is None and cls.retries == retries and (base, top, on_truncate) == (
            DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY, "keep"
        ):
            return DEFAULTS
        return cls(retries, base, top, models, on_truncate, observer)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{name} must be a number of seconds of at least 0, not {value!r}")
    return float(value)


DEFAULTS = Resilience()


class Clock:
    """How a retry waits and where its jitter comes from; tests replace `CLOCK`'s parts
    (an instant `sleep`, a seeded `random`) so that no test sleeps for real."""

    def __init__(self) -> None:
        self.sleep: Callable[[float], Awaitable[None]] = anyio.sleep
        self.random: random.Random = random.Random()


CLOCK = Clock()


def retry_delay(retry: int, retry_after: float | None, settings: Resilience) -> float:
    """Seconds before the `retry`-th retry (from 1) of a request: what the provider asked
    for (`Retry-After`, at most `retry_max_delay`), else a random time between 0 and
    `min(retry_max_delay, retry_base_delay × 2^(retry-1))` (full jitter)."""
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), settings.retry_max_delay)
    ceiling = min(settings.retry_max_delay, settings.retry_base_delay * 2.0 ** min(retry - 1, 60))
    return CLOCK.random.uniform(0.0, ceiling)


def retry_after_of(exc: BaseException) -> float | None:
    """The wait a provider asked for (`ModelAPIError.retry_after`), in `exc` or its causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        value = getattr(current, "retry_after", None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        current = current.__cause__ or current.__context__
    return None


async def report(emit: Emit, settings: Resilience, event: Any) -> None:
    """A SlotRetry or SlotFallback: into the run's events, and to the caller's `on_retry`
    (which sees them in `complete()` and batches too, where no event stream is read)."""
    await emit(event)
    if settings.observer is not None:
        maybe = settings.observer(event)
        if hasattr(maybe, "__await__"):
            await maybe


def describe(error: ModelError) -> str:
    """A provider failure on one line, without its hint: `rate limited (HTTP 429): slow down`."""
    where = f" (HTTP {error.status})" if error.status is not None else ""
    detail = f": {error.detail}" if error.detail else ""
    return f"{error.what}{where}{detail}"


# -- retries: the model wrapper ---------------------------------------------------
@dataclass
class RetryRun:
    """One slot attempt's retry state, read by `RetryingModel` from `CURRENT_RETRIES`."""

    slot: str
    emit: Emit
    settings: Resilience
    model: Any  # the model of this attempt (named in mapped errors)
    restart: Callable[[str], Awaitable[None]] | None = None  # retracts what a failed attempt streamed

    def decide(self, exc: BaseException, retry: int) -> tuple[float, str] | None:
        """(delay, description) when the failure is worth retry number `retry`, else None."""
        if retry > self.settings.retries:
            return None
        from ..models import model_label

        mapped = map_model_error(exc, model_label(self.model))
        if mapped is None or not is_transient(mapped):
            return None
        return retry_delay(retry, retry_after_of(exc), self.settings), describe(mapped)

    async def wait(self, retry: int, delay: float, error: str, *, streamed: bool) -> None:
        if streamed and self.restart is not None:
            await self.restart("retry")  # SlotRetracted first, when tokens had gone out
        await report(self.emit, self.settings, SlotRetry(self.slot, retry, error, delay))
        await CLOCK.sleep(delay)

    async def attempt(self, call: Callable[[], Awaitable[T]], used: int = 0) -> tuple[T, int]:
        """`call()`, again after each transient failure while retries are left; (its
        result, the retries used so far, counting the `used` before it)."""
        while True:
            try:
                return await call(), used
            except Exception as exc:
                decision = self.decide(exc, used + 1)
                if decision is None:
                    raise
            used += 1
            await self.wait(used, *decision, streamed=False)


#: The retry state of the slot attempt in progress in this task (set around `agent.run`).
CURRENT_RETRIES: ContextVar[RetryRun | None] = ContextVar("struckdown_retries", default=None)


class RetryingModel(SlotRunWrapper):
    """Sends a request again after a transient provider failure (SPEC §14).

    Stateless: what one slot attempt needs comes from `CURRENT_RETRIES`; outside a slot
    run it passes requests through."""

    current = CURRENT_RETRIES

    async def serve(self, run: RetryRun, request: Request) -> ModelResponse:
        response, _ = await run.attempt(partial(request.send, self.wrapped))
        return response

    @asynccontextmanager
    async def serve_stream(self, run: RetryRun, request: Request) -> AsyncIterator[StreamedResponse]:
        open_stream = partial(request.open, self.wrapped)
        async with AsyncExitStack() as stack:
            stream, used = await _open(stack, open_stream, run, 0)
            yield _RetryingStream(stream, open_stream, run, used)


async def _open(
    stack: AsyncExitStack, open_stream: Callable[[], StreamContext], run: RetryRun, used: int
) -> tuple[StreamedResponse, int]:
    """Open a stream, retrying transient failures; (the stream, retries used so far)."""
    return await run.attempt(lambda: stack.enter_async_context(open_stream()), used)


class _RetryingStream(StreamedResponse):
    """A provider stream that starts over on a transient failure, even after it produced
    events: the failed attempt's text is retracted and the new attempt's events follow.
    Everything else is the current attempt's stream's; the usage of failed attempts is
    added to the response."""

    def __init__(self, first: StreamedResponse, open_stream: Callable[[], StreamContext], run: RetryRun, used: int) -> None:
        super().__init__(first.model_request_parameters)
        self._current = first
        self._open_stream = open_stream
        self._run = run
        self._used = used
        self._spent = RequestUsage()

    def __aiter__(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._event_iterator is None:
            events = self._events()
            if self._request_deadline is not None:
                events = self._request_deadline.iterate(events)
            self._event_iterator = events
        return self._event_iterator

    async def _events(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async with AsyncExitStack() as stack:
            while True:
                streamed = False
                try:
                    async for event in self._current:
                        if self._first_chunk_monotonic is None:
                            import time

                            self._first_chunk_monotonic = time.perf_counter()
                        streamed = True
                        yield event
                    return
                except Exception as exc:
                    decision = self._run.decide(exc, self._used + 1)
                    if decision is None:
                        raise
                self._spent = self._spent + self._current.usage
                self._used += 1
                await self._run.wait(self._used, *decision, streamed=streamed)
                self._current, self._used = await _open(stack, self._open_stream, self._run, self._used)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:  # pragma: no cover - unused
        async for event in self._events():
            yield event

    def get(self) -> ModelResponse:
        response = self._current.get()
        if self._spent.input_tokens or self._spent.output_tokens:
            response.usage = response.usage + self._spent
        return response

    @property
    def usage(self) -> RequestUsage:
        return self._spent + self._current.usage

    async def cancel(self) -> None:
        self._cancelled = True
        await self._current.cancel()

    async def close_stream(self) -> None:
        await self._current.close_stream()

    def get_stream_cancel_errors(self) -> tuple[type[BaseException], ...]:
        return self._current.get_stream_cancel_errors()

    @property
    def provider_response_id(self) -> str | None:
        current = self.__dict__.get("_current")
        return current.provider_response_id if current is not None else None

    @provider_response_id.setter
    def provider_response_id(self, value: str | None) -> None:
        pass  # the current attempt's stream holds it

    @property
    def model_name(self) -> str:
        return self._current.model_name

    @property
    def provider_name(self) -> str | None:
        return self._current.provider_name

    @property
    def provider_url(self) -> str | None:
        return self._current.provider_url

    @property
    def timestamp(self) -> datetime:
        return self._current.timestamp


# -- one slot's attempts: fallback, truncation, tool choice -------------------------
def model_name(model: Any) -> str:
    return str(getattr(model, "model_name", None) or type(model).__name__)


def _accepts(model: Any, setting: str) -> bool:
    """Whether the model's class takes `setting` (an ignored one warns on every request)."""
    while True:
        if setting in getattr(type(model), "unsupported_settings", frozenset()):
            return False
        if not isinstance(model, WrapperModel):
            return True
        model = model.wrapped


@dataclass
class SlotAttempts:
    """A slot's way down its models: the one it runs on, the fallbacks after it, and what
    the next attempt must know (the hint turn, the usage already spent)."""

    slot: str
    emit: Emit
    settings: Resilience
    control: Mapping[str, Any]
    models: list[Any]  # the slot's model, then its fallbacks (resolved as they are reached)
    resolve: Callable[[Any], Any]
    index: int = 0
    hint: str | None = None
    restart: Callable[[str], Awaitable[None]] | None = None
    usage: Any = None  # the RunUsage of the attempt in progress
    spent_runs: list[Any] = field(default_factory=list)  # the RunUsage of every failed attempt

    @classmethod
    def start(
        cls,
        slot: str,
        emit: Emit,
        settings: Resilience | None,
        control: Mapping[str, Any],
        model: Any,
        resolve: Callable[[Any], Any],
        tool_names: Sequence[str],
    ) -> SlotAttempts:
        settings = settings or DEFAULTS
        asked = control.get("fallback")
        fallbacks: tuple[Any, ...] = (
            tuple(m.strip() for m in str(asked).split(",") if m.strip()) if asked is not None else settings.fallback
        )
        choice = control.get("tool_choice")
        if choice is not None and choice not in TOOL_CHOICES and choice not in tool_names:
            raise TemplateRuntimeError(unknown_tool_message(slot, choice, tool_names))
        return cls(slot, emit, settings, control, [model, *fallbacks], resolve)

    @property
    def model(self) -> Any:
        return self.models[self.index]

    @property
    def on_truncate(self) -> str:
        return str(self.control.get("on_truncate") or self.settings.on_truncate)

    @property
    def fallback_used(self) -> str | None:
        return model_name(self.model) if self.index else None

    # -- what one attempt sends -----------------------------------------------------
    def request(self, history: list[ModelMessage], prompt: str | None) -> tuple[list[ModelMessage], str | None]:
        """(message_history, prompt) of this attempt: the slot's original request, plus the
        hint turn after a model that could not finish."""
        if self.hint is None:
            return history, prompt
        from .conversation import user_turn

        turn = HINT_TURN.format(reason=self.hint)
        if prompt:
            return [*history, user_turn(prompt)], turn
        return list(history), turn

    def model_settings(
        self, merged: ModelSettings, caller: Mapping[str, Any] | None, family: str
    ) -> ModelSettings | Callable[[Any], ModelSettings]:
        """The attempt's settings: the default output cap when nothing sets one, the SDK's
        own retries off (ours retry), and a forced tool choice on the first request only."""
        model = self.model
        own = getattr(model, "settings", None) or {}
        if "max_tokens" not in merged and "max_tokens" not in own:
            merged["max_tokens"] = default_max_tokens(family, merged.get("thinking"))
        if "max_retries" not in (caller or {}) and _accepts(model, "max_retries"):
            merged["max_retries"] = 0
        choice = self.control.get("tool_choice")
        if choice is None or choice in ("auto", "none"):
            return merged
        first = ModelSettings(**{**merged, "tool_choice": "required" if choice == "required" else [choice]})

        def per_request(ctx: Any) -> ModelSettings:
            return first if ctx.run_step <= 1 else merged

        return per_request

    def running(self) -> _Running:
        """Around one attempt's `agent.run`: its retry state, its usage (read even when it
        fails) and, with `parallel_tools=false`, tool calls one at a time."""
        from pydantic_ai.usage import RunUsage

        self.usage = RunUsage()
        return _Running(self, RetryRun(self.slot, self.emit, self.settings, self.model, self.restart))

    def truncated_error(self, run: Any) -> TruncatedError | None:
        """With on_truncate=error, the error for an answer whose last response was cut."""
        if self.on_truncate != "error" or not is_truncated(run.new_messages()):
            return None
        from ..models import model_label

        return TruncatedError(model_label(self.model), "the answer stopped at its output token limit (finish_reason 'length')")

    # -- fallback -------------------------------------------------------------------
    async def fall_back(self, error: BaseException) -> Any | None:
        """The next model to run the slot on after `error`, or None (no fallback applies)."""
        reason, hint = fallback_reason(error)
        if reason is None or self.index + 1 >= len(self.models):
            return None
        if self.usage is not None:
            self.spent_runs.append(self.usage)
        failed = self.model
        try:
            self.models[self.index + 1] = self.resolve(self.models[self.index + 1])
        except StruckdownError:
            raise
        except Exception as exc:  # an unusable fallback name: say which
            raise ConfigurationError(f"slot {self.slot!r}: fallback model {self.models[self.index + 1]!r}: {exc}") from exc
        self.index += 1
        self.hint = reason if hint else None
        if self.restart is not None:
            await self.restart("fallback")
        await report(self.emit, self.settings, SlotFallback(self.slot, model_name(failed), model_name(self.model), reason))
        return self.model


class _Running:
    """The context of one attempt (a class, not a generator: it is entered once per slot)."""

    __slots__ = ("attempts", "run", "token", "order")

    def __init__(self, attempts: SlotAttempts, run: RetryRun) -> None:
        self.attempts, self.run = attempts, run
        self.order: Any = None

    def __enter__(self) -> Any:
        self.token = CURRENT_RETRIES.set(self.run)
        if self.attempts.control.get("parallel_tools") is False:
            from pydantic_ai.tool_manager import ToolManager

            self.order = ToolManager.parallel_execution_mode("sequential")
            self.order.__enter__()
        return self.attempts.usage

    def __exit__(self, *exc: Any) -> None:
        if self.order is not None:
            self.order.__exit__(*exc)
        CURRENT_RETRIES.reset(self.token)


def fallback_reason(error: BaseException) -> tuple[str | None, bool]:
    """(why the slot could not finish, whether the next model should be told) for an error
    that is a fallback trigger; (None, False) for any other error."""
    from .tools import BadModelOutput, ToolLimitExceeded

    if isinstance(error, TruncatedError):
        return "its answer was cut off at the output token limit", True
    if isinstance(error, ModelError):
        return describe(error), False
    if isinstance(error, ToolLimitExceeded):
        return f"its tool loop hit its limit ({_sentence(error.detail)})", True
    if isinstance(error, BadModelOutput):
        full = str(error.args[2]) if len(error.args) > 2 else error.detail
        problem = (full.partition("(last problem: ")[2].rstrip(")") or full).partition(" For further information")[0]
        return f"its answer failed validation every time (last problem: {_sentence(problem, first=False)})", True
    return None, False


def _sentence(text: str, *, first: bool = True) -> str:
    """pydantic-ai's message as a clause: on one line, its first sentence, lower case."""
    text = " ".join(str(text).split())
    if first:
        text = text.split(". ")[0]
    text = text.rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def is_truncated(messages: Sequence[ModelMessage]) -> bool:
    """Whether the answer's last response stopped at its token limit."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message.finish_reason == "length"
    return False


def slot_error(exc: BaseException, slot: str, model: Any) -> StruckdownError | None:
    """struckdown's error for what ended a slot attempt (None: not ours to map)."""
    from pydantic_ai.exceptions import OutputTokenLimitExceeded, UnexpectedModelBehavior, UsageLimitExceeded

    from ..models import model_display
    from .tools import BadModelOutput, ToolLimitExceeded

    if isinstance(exc, UsageLimitExceeded):
        return exc if isinstance(exc, ToolLimitExceeded) else ToolLimitExceeded(slot, str(exc))
    if isinstance(exc, OutputTokenLimitExceeded) and not isinstance(exc, StruckdownError):
        what = "a tool call" if type(exc).__name__ == "IncompleteToolCall" else "the typed answer"
        return TruncatedError(model_display(model), f"{what} was cut off: {' '.join(exc.message.split())}")
    mapped: StruckdownError | None = map_model_error(exc, model_display(model))
    if mapped is None and isinstance(exc, UnexpectedModelBehavior) and not isinstance(exc, StruckdownError):
        mapped = BadModelOutput(slot, model_display(model), exc)
    return mapped


# -- tool choice: checked before any model call -----------------------------------
def unknown_tool_message(slot: str, choice: str, tool_names: Sequence[str]) -> str:
    from ..check import close_match

    known = list(tool_names)
    where = close_match(choice, known, "tools") if known else "no tools were given"
    return f"slot {slot!r}: tool_choice={choice} names no tool of this run ({where})"


def check_tool_choices(program: Any, tool_names: Sequence[str]) -> None:
    """A `tool_choice=` naming a tool the run does not have is an error before any model
    call, at the option's position (values written as `{{ }}` are checked as their slot starts)."""
    for plan in program.plans.values():
        choice = plan.control.get("tool_choice")
        if choice is None or not isinstance(choice, str) or choice in TOOL_CHOICES or choice in tool_names:
            continue
        from ..check import close_match
        from ..syntax.source import SourceMap

        option = next(o for o in plan.slot.options if o.key == "tool_choice")
        template = program.template
        known = list(tool_names)
        raise SourceMap(template.source, template.filename).for_file(option.pos.filename).error(
            f"tool_choice={choice} names no tool of this run",
            option.pos.line,
            option.pos.column,
            close_match(choice, known, "tools") if known else "no tools were given: pass tools=[…] (or --tools FILE.py)",
        )
