"""The variables a template reads, and the ones a context leaves undefined.

A template reads a name in its text (`{{ nme }}`), in an option (`min={{ low }}`) or in
a condition (`{% if x %}`). A name is *expected* when no slot or action answered it
earlier in template order, so it must come from the context. `sd check` lists the
expected names; every run checks them against its context before any model call:
a missing one is a warning (the `warnings` module and the `struckdown` logger, once
per template and name) or, with `strict_undefined=True`, an `UndefinedVariableError` (a `TemplateRuntimeError`).
Both name the context key the missing name is most likely a typo of (`custmer` → `customer`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import UndefinedVariableError
from .notices import warn
from .plan import node_reads
from .syntax.nodes import Action, Pos, Slot, Text, walk

if TYPE_CHECKING:
    from .plan import Program

from .log import logger

#: Names Jinja provides inside every template (`loop` inside a for loop).
JINJA_NAMES = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop"})


@dataclass(frozen=True)
class Read:
    """A name the template reads before anything in it answers it."""

    name: str
    pos: Pos
    answered_at: int | None = None  # the line of a later slot of that name, if any

    @property
    def line(self) -> int:
        return self.pos.line

    def message(self, names: Collection[str] = ()) -> str:
        """What is wrong, with a close match among `names` (the context's keys) when one exists."""
        where = f" of {self.pos.filename}" if self.pos.filename else ""
        text = f"undefined variable {self.name!r} (line {self.pos.line}{where}): not in the context and not answered before"
        close = self.close_match(names)
        return f"{text}; did you mean {close!r}?" if close else text

    def close_match(self, names: Collection[str]) -> str | None:
        """The name of `names` this one is most likely a typo of (`custmer` → `customer`)."""
        import difflib

        found = difflib.get_close_matches(self.name, sorted(str(n) for n in names), n=1)
        return found[0] if found else None

    def hint(self, names: Collection[str] = ()) -> str:
        if self.answered_at is not None:
            return f"{self.name!r} is answered later (line {self.answered_at}); a template can only read earlier answers"
        close = self.close_match(names)
        if close is not None:
            return f"did you mean {close!r}, a key of the context? Or add {self.name!r} (sd: -c {self.name}=…)"
        return f"add it to the context (sd: -c {self.name}=…)"


def expected(program: Program) -> tuple[Read, ...]:
    """Every name the template reads before answering it, first read first (one per name)."""
    cached: tuple[Read, ...] | None = program.memo.get("expected")
    if cached is None:
        cached = program.memo["expected"] = _expected(program)
    return cached


def _expected(program: Program) -> tuple[Read, ...]:
    renderer = program.environment.renderer
    answered_at = {
        node.key: node.pos.line
        for segment in program.segments
        for node in walk(segment.nodes)
        if isinstance(node, (Slot, Action)) and node.key is not None
    }
    defined: set[str] = set(JINJA_NAMES)
    found: dict[str, Read] = {}
    for segment in program.segments:
        local: set[str] = set()  # {% set %} values and macros of this segment's text (0.18 rendered per segment)
        for node in walk(segment.nodes):
            new = node_reads(node, renderer) - defined - local - found.keys()
            placed = [(locate(node.source, node.pos, name) if isinstance(node, Text) else node.pos, name) for name in new]
            for pos, name in sorted(placed, key=lambda item: (item[0].line, item[0].column, item[1])):
                found[name] = Read(name, pos, answered_at.get(name))
            if isinstance(node, (Slot, Action)) and node.key is not None:
                defined.add(node.key)
            elif isinstance(node, Text):  # {% set %} values and macros carry to later text (0.18)
                local |= renderer.defined_names(node.source)
    return tuple(found.values())


def missing(program: Program, names: Collection[str]) -> list[Read]:
    """The expected names `names` (a context's keys) does not provide."""
    return [read for read in expected(program) if read.name not in names]


def check_context(program: Program, context: Mapping[str, Any], *, strict: bool) -> None:
    """Warn (or, strict, raise before any model call) for every expected name the context lacks."""
    reads = expected(program)
    if not reads:
        return
    absent = [read for read in reads if read.name not in context]
    if not absent:
        return
    if strict:  # the error adds how strictness was asked for (--strict or strict_undefined=True)
        raise UndefinedVariableError("; ".join(read.message(context.keys()) for read in absent))
    warned: set[str] = program.memo.setdefault("warned", set())
    for read in absent:
        # once per template and name, like the warnings module's own default
        if read.name not in warned:
            warned.add(read.name)
            logger.warning("%s", read.message(context.keys()))
        warn(read.message(context.keys()), at=read.pos)

_JINJA_BLOCK = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def locate(source: str, pos: Pos, name: str) -> Pos:
    """The position of the first Jinja expression in `source` that mentions `name`."""
    offset = 0
    for block in _JINJA_BLOCK.finditer(source):
        found = re.search(rf"\b{re.escape(name)}\b", block.group(0))
        if found:
            offset = block.start() + found.start()
            break
    before = source[:offset]
    newlines = before.count("\n")
    if newlines == 0:
        return Pos(pos.line, pos.column + offset, pos.filename)
    return Pos(pos.line + newlines, offset - before.rfind("\n"), pos.filename)
