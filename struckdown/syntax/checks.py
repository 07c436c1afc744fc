"""Checks over a whole parsed template that no single grammar rule can make."""

from __future__ import annotations

import re
from collections.abc import Iterator

import jinja2

from ..errors import TemplateSyntaxError
from .nodes import Action, If, Instructions, Node, Slot, Text, Together, Turn

_JINJA_NEWLINE = re.compile(r"\r\n|\r|\n")

#: Text with this many `{% %}` tags is compiled to Python at parse time, so Python's
#: nesting limit (20 nested `{% for %}` blocks) fails the parse, not the run. With fewer
#: tags the limit cannot be reached, and the text is compiled on first render.
_COMPILE_AT = 10


class SourceMap:
    """Turns (line, column) into a positioned TemplateSyntaxError with the source line."""

    def __init__(self, text: str, filename: str | None) -> None:
        self.text = text
        self.filename = filename
        # Lines end at "\n" only, as the Lark lexer counts them ("\r", "\v", U+2028 … are
        # characters of a line, not line breaks).
        self._lines = [line.removesuffix("\r") for line in text.split("\n")]

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


def walk(nodes: tuple[Node, ...]) -> Iterator[Node]:
    """Every node, depth first, in document order."""
    for node in nodes:
        yield node
        if isinstance(node, (Instructions, Turn, Together)):
            yield from walk(node.body)
        elif isinstance(node, If):
            for branch in node.branches:
                yield from walk(branch.body)


def check_structure(nodes: tuple[Node, ...], src: SourceMap) -> None:
    _check_keys(nodes, set(), src)
    later: list[Together | Action] = []
    for node in walk(nodes):  # all Jinja first: later checks read names from it
        if isinstance(node, Text):
            _check_jinja(node, src)
        elif isinstance(node, (Together, Action)):
            later.append(node)
    for node in later:
        if isinstance(node, Together):
            _check_together(node, src)
        else:
            _check_action(node, src)


def _error(src: SourceMap, node: Node, message: str, hint: str | None = None) -> TemplateSyntaxError:
    return src.for_file(node.pos.filename).error(message, node.pos.line, node.pos.column, hint)


def _check_keys(nodes: tuple[Node, ...], seen: set[str], src: SourceMap) -> None:
    """Duplicate answer keys are errors, except in exclusive branches of one {% if %}."""
    for node in nodes:
        key = node.key if isinstance(node, (Slot, Action)) else None
        if key is not None:
            if key in seen:
                raise _error(src, node, f"duplicate slot key {key!r}", "each answer needs its own name")
            seen.add(key)
        if isinstance(node, Together):
            _check_keys(node.body, seen, src)
        elif isinstance(node, If):
            added: set[str] = set()
            for branch in node.branches:
                branch_seen = set(seen)
                _check_keys(branch.body, branch_seen, src)
                added |= branch_seen - seen
            seen |= added


def _check_jinja(node: Text, src: SourceMap) -> None:
    from ..render import compile_text, referenced_names

    try:
        referenced_names(node.source)  # parses and walks the Jinja AST
        if node.source.count("{%") >= _COMPILE_AT:
            compile_text(node.source)
        return
    except jinja2.TemplateSyntaxError as exc:
        pos = node.position_at(_jinja_line_offset(node.source, exc.lineno or 1))
        failure = src.for_file(pos.filename).error(f"invalid Jinja: {exc.message}", pos.line, pos.column)
    except (RecursionError, SyntaxError):  # SyntaxError: Python's own nesting limits
        failure = _error(src, node, "Jinja nests too deeply", "flatten the nested {% %} blocks or expressions")
    except Exception as exc:  # e.g. ValueError for an integer literal of 5,000 digits
        failure = _error(src, node, f"invalid Jinja: {type(exc).__name__}: {' '.join(str(exc).split())}")
    raise failure  # outside the except: the error carries no foreign context (Dask pickles it)


def _jinja_line_offset(source: str, jinja_line: int) -> int:
    """Where Jinja's line `jinja_line` starts in `source` (Jinja also counts a lone
    "\r" as a line break; the template counts "\n" only)."""
    offset = 0
    for _ in range(jinja_line - 1):
        match = _JINJA_NEWLINE.search(source, offset)
        if match is None:
            break
        offset = match.end()
    return offset


def _check_together(block: Together, src: SourceMap) -> None:
    from ..render import referenced_names

    siblings = {n.key for n in block.body if isinstance(n, Slot)}
    for node in block.body:
        names: frozenset[str] = frozenset()
        if isinstance(node, Text):
            names = referenced_names(node.source)
        elif isinstance(node, Slot):
            from .nodes import JinjaValue
            from ..render import expression_names

            for option in node.options:
                if isinstance(option.value, JinjaValue):
                    names |= expression_names(option.value.expression)
        clash = sorted(names & siblings)
        if clash:
            raise _error(
                src,
                node,
                f"inside <together>, {clash[0]!r} refers to a sibling slot",
                "slots in a <together> block run at the same time and cannot see each other; "
                "move the reference after </together>",
            )


def _check_action(node: Action, src: SourceMap) -> None:
    from ..actions import default_actions

    if node.name not in default_actions:
        raise _error(
            src,
            node,
            f"unknown action @{node.name}",
            f"known actions: {', '.join('@' + n for n in default_actions.names())}",
        )
    try:
        default_actions.get(node.name).check(node)
    except ValueError as exc:
        raise _error(src, node, f"@{node.name}: {exc}") from None
