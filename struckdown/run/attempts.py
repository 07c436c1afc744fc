"""Resilient slots (SPEC §14): retries, fallback models, truncation, tool choice, order.

Two layers, so that each does what it can see:

* **Retries** live in a model wrapper, `RetryingModel`, around the model a slot runs on
  (below the response cache, above the budgets' per-request meter): a transient
  provider failure (`models.errors.is_transient`) is sent again after an exponential
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

The settings both layers read are in `resilience_settings.py`, the retry layer in
`retries.py`; this module is the fallback layer, and the names of all three are
importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RunUsage

from ..errors import ConfigurationError, StruckdownError, TemplateRuntimeError
from ..incremental import SlotFallback
from ..models.errors import ModelError, TruncatedError, map_model_error
from ..slot_options import TOOL_CHOICES, default_max_tokens

# with the names of resilience_settings.py and retries.py, split from this module, as before
from .resilience_settings import DEFAULT_RETRIES as DEFAULT_RETRIES
from .resilience_settings import DEFAULT_RETRY_BASE_DELAY as DEFAULT_RETRY_BASE_DELAY
from .resilience_settings import DEFAULT_RETRY_MAX_DELAY as DEFAULT_RETRY_MAX_DELAY
from .resilience_settings import DEFAULTS as DEFAULTS
from .resilience_settings import Emit as Emit
from .resilience_settings import Resilience as Resilience
from .resilience_settings import describe as describe
from .resilience_settings import report as report
from .wrappers.retries import RetryingModel as RetryingModel
from .wrappers.retries import RetryRun as RetryRun
from .wrappers.retries import retry_after_of as retry_after_of
from .wrappers.retries import retry_delay as retry_delay

HINT_TURN = "A previous attempt could not finish: {reason}."
#: What a TruncatedError adds to its cause (which its class already says): why the cut answer is not used.
CUT_TYPED = "a typed answer cut short cannot be used"
CUT_REFUSED = "on_truncate=error refuses a cut answer"
CUT_TOOL_CALL = "a tool call cut short cannot be used"


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
    resolve: Callable[..., Any]
    index: int = 0
    hint: str | None = None
    restart: Callable[[str], Awaitable[None]] | None = None
    usage: Any = None  # the RunUsage of the attempt in progress
    spent_runs: list[Any] = field(default_factory=list)  # the RunUsage of every failed attempt
    escalated_at: int | None = None  # the index of the model a less confident answer escalated to

    @classmethod
    def start(
        cls,
        slot: str,
        emit: Emit,
        settings: Resilience | None,
        control: Mapping[str, Any],
        model: Any,
        resolve: Callable[..., Any],
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
        return model_name(self.model) if self.index and self.index != self.escalated_at else None

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
        self, merged: ModelSettings, caller: Mapping[str, Any] | None, family: str, context_left: int | None = None
    ) -> ModelSettings | Callable[[Any], ModelSettings]:
        """The attempt's settings: the default output cap when nothing sets one (never more
        than `context_left`, what the server's context leaves: run/context_window.py), the
        SDK's own retries off (ours retry), and a forced tool choice on the first request only."""
        model = self.model
        own = getattr(model, "settings", None) or {}
        if "max_tokens" not in merged and "max_tokens" not in own:
            cap = default_max_tokens(family, merged.get("thinking"))
            merged["max_tokens"] = cap if context_left is None else min(cap, context_left)
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
        """Around one attempt's `agent.run`: its usage (read even when it fails) and, with
        `parallel_tools=false`, tool calls one at a time."""
        self.usage = RunUsage()
        return _Running(self)

    def retries(self) -> RetryRun:
        """The retry state of an attempt on the current model (the `retries` of its SlotRun)."""
        return RetryRun(self.slot, self.emit, self.settings, self.model, self.restart)

    def truncated_error(self, run: Any, *, typed: bool = False) -> TruncatedError | None:
        """The error for an answer whose last response was cut: always for a typed answer
        (one that parsed may still lack what came after the cut, e.g. a list's last
        items), for free text with on_truncate=error."""
        if not (typed or self.on_truncate == "error") or not is_truncated(run.new_messages()):
            return None
        from ..models import model_label

        return TruncatedError(model_label(self.model), CUT_TYPED if typed else CUT_REFUSED)

    # -- escalation (SPEC §27) ----------------------------------------------------------
    def escalate(self, target: Any, slot: str) -> Any:
        """Ask again on `target` (a less confident answer escalates): the answer so far is
        billed, the fallbacks after this model stay after the escalated one."""
        if self.usage is not None:
            self.spent_runs.append(self.usage)
            self.usage = None
        try:
            model = self.resolve(target, option="escalate")
        except StruckdownError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"slot {slot!r}: escalate model {target!r}: {exc}") from exc
        self.index += 1
        self.models.insert(self.index, model)
        self.escalated_at = self.index
        self.hint = None
        return model

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

    __slots__ = ("attempts", "order")

    def __init__(self, attempts: SlotAttempts) -> None:
        self.attempts = attempts
        self.order: Any = None

    def __enter__(self) -> Any:
        if self.attempts.control.get("parallel_tools") is False:
            from pydantic_ai.tool_manager import ToolManager

            self.order = ToolManager.parallel_execution_mode("sequential")
            self.order.__enter__()
        return self.attempts.usage

    def __exit__(self, *exc: Any) -> None:
        if self.order is not None:
            self.order.__exit__(*exc)


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
        problem = error.reason or error.detail
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
        tool_call = type(exc).__name__ == "IncompleteToolCall"
        if tool_call and "did not run" in exc.message:  # run/tools.py:cut_short names the calls
            return TruncatedError(model_display(model), " ".join(exc.message.split()))
        limit = re.search(r"token limit \(([^)]*)\)", exc.message)  # pydantic-ai's text repeats the cause
        what = CUT_TOOL_CALL if tool_call else CUT_TYPED
        return TruncatedError(model_display(model), what + (f" (max_tokens: {limit.group(1)})" if limit else ""))
    mapped: StruckdownError | None = map_model_error(exc, model_display(model))
    if mapped is None and isinstance(exc, UnexpectedModelBehavior) and not isinstance(exc, StruckdownError):
        mapped = BadModelOutput(slot, model_display(model), exc)
    return mapped


# -- tool choice: checked before any model call -----------------------------------
def unknown_tool_message(slot: str, choice: str, tool_names: Sequence[str]) -> str:
    from ..errors import close_match

    known = list(tool_names)
    where = close_match(choice, known, "tools") if known else "no tools were given"
    return f"slot {slot!r}: tool_choice={choice} names no tool of this run ({where})"
