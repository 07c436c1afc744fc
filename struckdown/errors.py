"""One error hierarchy, so callers can catch `StruckdownError` and know it is ours.

Each error's constructor takes its data as arguments and passes them all to
`Exception.__init__`, so the default pickling (`cls(*args)`) rebuilds it: errors
cross to and from Dask workers with no hand-written `__reduce__`. `__str__` formats
the message from the data.

Nothing here imports pydantic-ai, so `sd check` and `parse()` stay fast; the one
error that must also be a pydantic-ai class, `ToolLimitExceeded` (a
`UsageLimitExceeded`), lives in run/tools.py, and provider errors in models/errors.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .results import Result, SlotResult, Usage


def close_match(word: str, choices: list[str], label: str) -> str:
    """The hint for an unknown name: the closest known one, if any, then all of them."""
    import difflib

    close = difflib.get_close_matches(word, choices, n=1)
    listing = f"{label}: {', '.join(choices)}"
    return f"did you mean {close[0]!r}? {listing}" if close else listing


class ApprovalRequestLike(Protocol):
    """What `Paused.requests` holds (`struckdown.ApprovalRequest`; a Protocol here, so
    errors.py imports nothing)."""

    @property
    def id(self) -> str: ...

    @property
    def tool_name(self) -> str: ...

E = TypeVar("E", bound=BaseException)


class StruckdownError(Exception):
    """Base class of every error struckdown raises on purpose.

    `slot` names the slot (or action) the error came from, when it came from one; the
    engine fills it in as the error leaves the slot. An exception that is not
    struckdown's passes through as it is, with only a PEP 678 note naming its slot
    (`error_slot` reads either).
    """

    slot: str | None = None


class TemplateSyntaxError(StruckdownError):
    """A template that cannot run; raised before any model call.

    `line`/`column` are 1-based and point at the offending spot (for a duplicate
    slot key, at the second occurrence).
    """

    def __init__(
        self,
        message: str,
        line: int,
        column: int,
        source_line: str = "",
        hint: str | None = None,
        filename: str | None = None,
    ) -> None:
        super().__init__(message, line, column, source_line, hint, filename)
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.hint = hint
        self.filename = filename

    def __str__(self) -> str:
        where = f"{self.filename}:" if self.filename else "line "
        text = f"{where}{self.line}:{self.column}: {self.message}"
        if self.source_line:
            caret = " " * (max(self.column, 1) - 1) + "^"
            text += f"\n    {self.source_line}\n    {caret}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class TemplateRuntimeError(StruckdownError):
    """The template was valid but something it needed at run time was not (a Jinja
    expression failed, an option rendered to a bad value, an action failed)."""


#: Who shows the errors: "python" (the library's spelling of options) or "cli" (`sd`'s flags).
#: `sd`'s commands set it (cli/errors.py:reporting_errors); a message that names an option
#: reads it when it is shown. A ContextVar: the message is made deep in the library, which takes
#: no front-end argument, and a command's library calls and a host's share one process.
FRONT_END: ContextVar[str] = ContextVar("struckdown_front_end", default="python")


class UndefinedVariableError(TemplateRuntimeError):
    """With `strict_undefined=True` (sd: `--strict`): the template reads a name that is
    neither in the context nor answered before it (raised before any model call)."""

    def __str__(self) -> str:
        setting = "--strict" if FRONT_END.get() == "cli" else "strict_undefined=True"
        return f"{super().__str__()} ({setting})"


class ConfigurationError(StruckdownError):
    """Missing or inconsistent configuration, e.g. no model configured."""


class SlotError(StruckdownError):
    """A slot could not be filled; `slot` names it and `__cause__` holds the reason."""

    def __init__(self, slot: str, message: str) -> None:
        super().__init__(slot, message)
        self.slot = slot
        self.detail = message

    def __str__(self) -> str:
        return f"slot {self.slot!r}: {self.detail}"


class Halted(StruckdownError):
    """A `[[halt:…]]` guard tripped.

    `results` is the Result of every slot that finished, the tripping guard's verdict
    included (its `halted` is this error). The error keeps the slot results, not the
    Result, so the two never form a reference cycle.
    """

    def __init__(self, slot: str, reason: str, results: Result | None = None) -> None:
        super().__init__(slot, reason)
        self.slot = slot
        self.reason = reason
        self._finished: Mapping[str, SlotResult] | None = None
        self._order: tuple[str, ...] = ()
        self._discarded: Usage | None = None
        if results is not None:
            self.keep(results.results, results.order)

    def __str__(self) -> str:
        return f"halted by guard {self.slot!r}: {self.reason}"

    def keep(self, finished: Mapping[str, SlotResult], order: tuple[str, ...], discarded: Usage | None = None) -> None:
        """Hold the slots that finished before the trip, and what the discarded ones
        cost (the engine calls this)."""
        self._finished, self._order, self._discarded = dict(finished), tuple(order), discarded

    @property
    def results(self) -> Result | None:
        if self._finished is None:
            return None
        from .results import Result

        return Result(self._finished, self._order, halted=self, discarded=self._discarded)


_NOTE = "struckdown: raised in slot "


def slot_note(slot: str) -> str:
    """The note (PEP 678) a foreign error gets as it leaves a slot; tracebacks show it."""
    return f"{_NOTE}{slot!r}"


def slot_of_note(exc: BaseException) -> str | None:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_NOTE):
            return note[len(_NOTE) + 1 : -1]
    return None


class SlotBlame:
    """`with SlotBlame(slot):` an error leaving a slot names it: a struckdown error in its
    `slot`, any other with a PEP 678 note (`slot_note`). A class: entered once per slot."""

    __slots__ = ("slot",)

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, trace: Any) -> None:
        if isinstance(exc, StruckdownError):
            if exc.slot is None:
                exc.slot = self.slot
        elif isinstance(exc, Exception) and slot_of_note(exc) is None:
            exc.add_note(slot_note(self.slot))
        return None  # the error goes on as it is


def error_slot(exc: BaseException) -> str | None:
    """The slot (or action) an error came from: `.slot` of struckdown's errors, the
    note of any other."""
    if isinstance(exc, StruckdownError):
        return exc.slot
    return slot_of_note(exc)


def find_error(exc: BaseException, kind: type[E]) -> E | None:
    """The first `kind` error in `exc` or in the (nested) exception groups it holds."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_error(inner, kind)
            if found is not None:
                return found
    return None


def first_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups
    (a cancellation only when nothing else is there)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        real = [e for e in exc.exceptions if not _is_cancellation(e)]
        exc = real[0] if real else exc.exceptions[0]
    return exc


def _is_cancellation(exc: BaseException) -> bool:
    import asyncio

    return isinstance(exc, asyncio.CancelledError)


class MCPServerError(StruckdownError):
    """An MCP server could not be started or reached (`server` names it; SPEC §16)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(server, message)
        self.server = server
        self.detail = message

    def __str__(self) -> str:
        return f"MCP server {self.server!r}: {self.detail}"


class Paused(StruckdownError):
    """Tool calls wait for a person's decision (SPEC §12): the run stopped instead of asking.

    `requests` lists the `ApprovalRequest`s to decide; `state` is a JSON-serialisable dict
    (write it anywhere) that `struckdown.resume(state, decisions, …)` continues from, in
    this process or another; `results` is the Result of the slots that finished (its
    `paused` is this error). Like `Halted`, the error keeps the slot results, not the
    Result, so the two never form a reference cycle.
    """

    def __init__(self, requests: Sequence[ApprovalRequestLike], state: Mapping[str, Any]) -> None:
        super().__init__(list(requests), dict(state))
        self.requests = list(requests)
        self.state = dict(state)
        self._finished: Mapping[str, SlotResult] | None = None
        self._order: tuple[str, ...] = ()
        self._discarded: Usage | None = None

    def __str__(self) -> str:
        listed = "; ".join(f"{r.id}: {r.tool_name}" for r in self.requests)
        count = len(self.requests)
        from .wording import counted

        return f"paused: {counted(count, 'tool call')} await{'s' if count == 1 else ''} approval ({listed})"

    def keep(self, finished: Mapping[str, SlotResult], order: tuple[str, ...], spent: Usage | None = None) -> None:
        """Hold the slots that finished before the pause, and what the paused slots spent
        so far (the engine calls this)."""
        self._finished, self._order, self._discarded = dict(finished), tuple(order), spent

    @property
    def results(self) -> Result:
        from .results import Result

        return Result(self._finished or {}, self._order, discarded=self._discarded, paused=self)


class BudgetExceeded(StruckdownError):
    """A run-wide or batch-wide budget ran out (SPEC §13).

    `limit` names what ran out (`request_limit`, `tool_calls_limit`, `input_tokens_limit`,
    `output_tokens_limit`, `total_tokens_limit` or `max_cost`), `scope` is "run" or
    "batch" (a batch row that never started), and `results` is the Result so far: the
    slots that finished before the limit was crossed, with every request the run made
    in its usage. The slot whose response crossed the limit, and every slot still
    running, are not in it.
    """

    def __init__(self, limit: str, message: str, scope: str = "run") -> None:
        super().__init__(limit, message, scope)
        self.limit = limit
        self.message = message
        self.scope = scope
        self._finished: Mapping[str, SlotResult] = {}
        self._order: tuple[str, ...] = ()
        self._discarded: Usage | None = None

    def __str__(self) -> str:
        return self.message

    def keep(self, finished: Mapping[str, SlotResult], order: tuple[str, ...], discarded: Usage | None = None) -> None:
        """Hold the slots that finished and what the others cost (the engine calls this)."""
        self._finished, self._order, self._discarded = dict(finished), tuple(order), discarded

    @property
    def results(self) -> Result:
        from .results import Result

        return Result(self._finished, self._order, discarded=self._discarded)


class MediaError(TemplateRuntimeError):
    """An image or file in the context cannot be sent as placed: in `<system>` or an
    assistant turn, more images than `max_images` in one request, an image larger
    than `image_max_side` without Pillow to shrink it, or bytes that are no image."""


class OutcomeUnknown(StruckdownError):
    """SPEC §29: a batch row met a call of a write tool that started in an earlier run and
    never finished, and the tool has no reconcile hook. The row is neither ok nor failed:
    it waits for the user's decision (`sd batch --resume --decide happened|not-happened|deny`).
    `effect` is the call's effect id, `tool_name` and `arguments` the call, `row` the row."""

    def __init__(self, effect: str, tool_name: str, arguments: Mapping[str, Any], row: int | None) -> None:
        super().__init__(effect, tool_name, dict(arguments), row)
        self.effect = effect
        self.tool_name = tool_name
        self.arguments = dict(arguments)
        self.row = row

    def label(self) -> str:
        import json

        args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in self.arguments.items())
        return f"outcome unknown: did {self.tool_name}({args}) happen?"

    def __str__(self) -> str:
        return self.label()


class InputError(StruckdownError):
    """What the caller gave cannot be used: a table, a tools file, a journal. `message`
    names the file (and the line, where there is one); `sd` exits with code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OutputError(StruckdownError):
    """A file struckdown writes (an output table, a batch journal or its lock) cannot be
    written, or changed under it; `sd` exits with code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def exception_text(exc: BaseException) -> str:
    """`Type: message` of an exception that is not ours; one raised without words (a
    `MemoryError`, most often) still says what happened."""
    text = str(exc).strip()
    if not text and isinstance(exc, MemoryError):
        text = "out of memory"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe_error(exc: BaseException, *, name_slot: bool = True) -> str:
    """The one-line (or, for a syntax error, positioned multi-line) message for `exc`, as
    `sd`, the playground and a batch journal show it: the slot it came from first
    (`name_slot=False`: no slot named, for a template the user did not write)."""
    exc = first_error(exc)
    if isinstance(exc, (InputError, OutputError)):
        return exc.message  # it names the file already
    if isinstance(exc, (TemplateSyntaxError, ConfigurationError)):
        message = str(exc)  # positioned, with its source line and hint; or what to set
    elif isinstance(exc, StruckdownError):
        message = f"{type(exc).__name__}: {exc}"  # the class says what kind of failure it was
    else:
        message = exception_text(exc)
    slot = error_slot(exc)  # the slot it came from
    if slot and not name_slot:
        return message.replace(f"slot {slot!r}: ", "")
    if slot and repr(slot) not in message:
        message = f"slot {slot!r}: {message}"
    return message


class FlowError(StruckdownError):
    """SPEC §33: a private value would reach a remote model or an external tool, or untrusted
    free text would reach a slot that can call an external tool. Raised by `sd check --flow`
    and before any model call of a run (positioned: the sink's line:column and the chain that
    brought the value there), and by the model stack at the request boundary (`position` None)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 filename: str | None = None, chain: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message, self.line, self.column, self.filename, self.chain = message, line, column, filename, chain

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.line, self.column, self.filename, self.chain))

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        where = f"{self.filename}:" if self.filename else "line "
        return f"{where}{self.line}:{self.column}: {self.message}"
