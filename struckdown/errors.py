"""One error hierarchy, so callers can catch `StruckdownError` and know it is ours.

Nothing here imports pydantic-ai, so `sd check` and `parse()` stay fast; errors
that must also be pydantic-ai exceptions live next to the code that raises them
(`ToolLimitExceeded` in run/tools.py, provider errors in model_errors.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .results import Result


class StruckdownError(Exception):
    """Base class of every error struckdown raises on purpose."""


class TemplateSyntaxError(StruckdownError):
    """A template that cannot run; raised before any model call.

    `line`/`column` are 1-based and point at the offending spot (for a duplicate
    slot key, at the second occurrence).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        source_line: str = "",
        hint: str | None = None,
        filename: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.hint = hint
        self.filename = filename
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"{self.filename}:" if self.filename else "line "
        text = f"{where}{self.line}:{self.column}: {self.message}"
        if self.source_line:
            caret = " " * (max(self.column, 1) - 1) + "^"
            text += f"\n    {self.source_line}\n    {caret}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_syntax_error, (self.message, self.line, self.column, self.source_line, self.hint, self.filename))


def _rebuild_syntax_error(*args: Any) -> TemplateSyntaxError:
    message, line, column, source_line, hint, filename = args
    return TemplateSyntaxError(
        message, line=line, column=column, source_line=source_line, hint=hint, filename=filename
    )


class TemplateRuntimeError(StruckdownError):
    """The template was valid but something it needed at run time was not (a Jinja
    expression failed, an option rendered to a bad value, an action failed)."""


class ConfigurationError(StruckdownError):
    """Missing or inconsistent configuration, e.g. no model configured."""


class SlotError(StruckdownError):
    """A slot could not be filled; `slot` names it and `__cause__` holds the reason."""

    def __init__(self, slot: str, message: str) -> None:
        self.slot = slot
        self.detail = message
        super().__init__(f"slot {slot!r}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.slot, self.detail))


class Halted(StruckdownError):
    """A `[[halt:…]]` guard tripped.

    `results` holds every slot that finished, the tripping guard's verdict included.
    """

    def __init__(self, slot: str, reason: str, results: Result | None = None) -> None:
        self.slot = slot
        self.reason = reason
        self.results = results
        super().__init__(f"halted by guard {slot!r}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Halted, (self.slot, self.reason), {"results": self.results})
