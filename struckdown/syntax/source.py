"""Positions → errors: the source lines a positioned TemplateSyntaxError shows."""

from __future__ import annotations

from functools import cached_property

from ..errors import TemplateSyntaxError


class SourceMap:
    """Turns (line, column) into a positioned TemplateSyntaxError with the source line."""

    def __init__(self, text: str, filename: str | None) -> None:
        self.text = text
        self.filename = filename

    @cached_property
    def _lines(self) -> list[str]:
        """Split only when an error needs its line. Lines end at "\n" only, as the Lark
        lexer counts them ("\r", "\v", U+2028 … are characters of a line, not breaks)."""
        return [line.removesuffix("\r") for line in self.text.split("\n")]

    def error(self, message: str, line: int, column: int, hint: str | None = None) -> TemplateSyntaxError:
        source_line = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        return TemplateSyntaxError(
            message, line=line, column=column, source_line=source_line, hint=hint, filename=self.filename
        )

    def for_file(self, filename: str | None) -> SourceMap:
        if filename == self.filename or filename is None:
            return self
        with open(filename, encoding="utf-8") as handle:
            return SourceMap(handle.read(), filename)
