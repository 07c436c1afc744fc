"""One error hierarchy, so callers can catch `StruckdownError` and know it is ours.

Each error's constructor takes its data as arguments and passes them all to
`Exception.__init__`, so the default pickling (`cls(*args)`) rebuilds it: errors
cross to and from Dask workers with no hand-written `__reduce__`. `__str__` formats
the message from the data.

Nothing here imports pydantic-ai, so `sd check` and `parse()` stay fast; the one
error that must also be a pydantic-ai class, `ToolLimitExceeded` (a
`UsageLimitExceeded`), lives in run/tools.py, and provider errors in model_errors.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .results import Result, SlotResult, Usage

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




class MediaError(TemplateRuntimeError):
    """An image or file in the context cannot be sent as placed: in `<system>` or an
    assistant turn, more images than `max_images` in one request, an image larger
    than `image_max_side` without Pillow to shrink it, or bytes that are no image."""
