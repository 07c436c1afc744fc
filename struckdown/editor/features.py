"""What the language server answers, as plain functions of a template's text.

Positions here are offsets into the text (Python characters); the server turns
them into the client's line/character units. Diagnostics come from the one
parser and `sd check`'s linter (through `core`); tokens for ranges, completion
contexts and symbols come from the grammar-driven scanner, which keeps working
on a template that does not parse.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import slot_options as opts
from ..explain.words import limit_text, quantity
from ..types.table import TYPES
from . import core
from .pygments_lexer import scan
from .roles import ROLES, SEMANTIC_TYPES

TYPE_DOCS: dict[str, str] = {t.name: t.doc for t in TYPES.values() if not t.legacy}  # types/table.py's rows

# ---------------------------------------------------------------------------
# the text as tokens


@dataclass(frozen=True)
class Tok:
    role: str | None
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class SlotSpan:
    start: int
    end: int
    tokens: tuple[Tok, ...]

    def first(self, role: str) -> Tok | None:
        return next((t for t in self.tokens if t.role == role), None)


def tokens(text: str) -> list[Tok]:
    return [Tok(role, pos, pos + len(value), value) for pos, role, value in scan(text)]


def slot_spans(toks: list[Tok]) -> list[SlotSpan]:
    out: list[SlotSpan] = []
    current: list[Tok] | None = None
    for tok in toks:
        if tok.role == "slot.open":
            current = [tok]
        elif current is not None:
            current.append(tok)
            if tok.role == "slot.close":
                out.append(SlotSpan(current[0].start, tok.end, tuple(current)))
                current = None
    return out


class Lines:
    """Offsets ↔ 1-based (line, column) of the parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, line: int, column: int) -> int:
        index = min(max(line, 1), len(self.starts)) - 1
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.text)
        return min(self.starts[index] + max(column, 1) - 1, end)

    def position(self, offset: int) -> tuple[int, int]:
        index = bisect_right(self.starts, offset) - 1
        return index + 1, offset - self.starts[index] + 1


# ---------------------------------------------------------------------------
# the template and the files beside it


@dataclass
class Workspace:
    """Settings from the client (`initializationOptions`)."""

    tools_file: str | None = None


@dataclass
class Analysis:
    text: str
    path: Path | None
    program: Any | None
    problems: list[core.Problem]
    context_file: Path | None = None
    context_names: list[str] = field(default_factory=list)
    tools_file: Path | None = None
    tools: list[core.ToolInfo] = field(default_factory=list)

    @cached_property
    def lines(self) -> Lines:
        return Lines(self.text)

    @cached_property
    def toks(self) -> list[Tok]:
        """Scanned when first needed: diagnostics of a clean text need no tokens."""
        return tokens(self.text)

    @cached_property
    def token_starts(self) -> list[int]:
        return [t.start for t in self.toks]

    @cached_property
    def slot_ends(self) -> dict[int, int]:
        return {span.start: span.end for span in slot_spans(self.toks)}


def analyze(text: str, path: Path | None, workspace: Workspace | None = None) -> Analysis:
    workspace = workspace or Workspace()
    context_file, names = core.context_names(path) if path else (None, [])
    tools_file = core.find_tools_file(path, workspace.tools_file) if path else None
    tools = core.tools_in(tools_file) if tools_file else []
    program, problems = core.check_source(
        text, path, context_names=set(names) if context_file else None, tools_given=bool(tools)
    )
    return Analysis(text, path, program, problems, context_file, names, tools_file, tools)


# ---------------------------------------------------------------------------
# diagnostics


@dataclass(frozen=True)
class Diagnostic:
    start: int
    end: int
    severity: str
    message: str


def diagnostics(analysis: Analysis) -> list[Diagnostic]:
    lines = analysis.lines
    out: list[Diagnostic] = []
    for problem in analysis.problems:
        message = problem.message + (f"\nhint: {problem.hint}" if problem.hint else "")
        if problem.filename:
            start, end = _include_tag(analysis, problem.filename)
            message = f"{problem.filename}:{problem.line}:{problem.column}: {message}"
        else:
            start = lines.offset(problem.line, problem.column)
            end = _token_end(analysis, start)
        out.append(Diagnostic(start, end, problem.severity, message))
    return out


def _token_end(analysis: Analysis, start: int) -> int:
    """Where a diagnostic starting at `start` ends: the whole slot when it points at
    `[[`, a name inside a Jinja expression, else the token there; one character at least.
    Looked up by bisection: a template with thousands of warnings stays linear."""
    text = analysis.text
    slot_end = analysis.slot_ends.get(start)
    if slot_end is not None:
        return slot_end
    index = bisect_right(analysis.token_starts, start) - 1
    if index >= 0:
        tok = analysis.toks[index]
        if tok.start <= start < tok.end and tok.role is not None:
            name = re.compile(r"[A-Za-z_]\w*").match(text, start)
            if tok.start < start and name:
                return name.end()
            return max(tok.start + len(tok.text.rstrip()), start + 1)
    return min(start + 1, len(text)) if start < len(text) else start


def _include_tag(analysis: Analysis, filename: str) -> tuple[int, int]:
    name = Path(filename).name
    for tok in analysis.toks:
        if tok.role == "include" and name in tok.text:
            return tok.start, tok.end
    return 0, 0


# ---------------------------------------------------------------------------
# completion


@dataclass(frozen=True)
class Completion:
    label: str
    kind: str  # "type" | "option" | "value" | "variable" | "action" | "tool"
    detail: str = ""
    documentation: str = ""
    insert_text: str | None = None


_HEAD = re.compile(r"\s*!?(@?)([A-Za-z_]\w*)?(?:[*+?]|\{[^}]*\})?\s*(:)?")


def completions(analysis: Analysis, offset: int) -> list[Completion]:
    before = analysis.text[:offset]
    slot_open = before.rfind("[[")
    if slot_open != -1 and "]]" not in before[slot_open:]:
        return _in_slot(analysis, before[slot_open + 2 :], slot_open)
    expression = before.rfind("{{")
    if expression != -1 and "}}" not in before[expression:]:
        return _variables(analysis, expression)
    return []


def _in_slot(analysis: Analysis, inside: str, slot_open: int) -> list[Completion]:
    head, pipe, rest = inside.partition("|")
    match = _HEAD.match(head)
    is_action = bool(match and match.group(1))
    if not pipe:
        if head.lstrip().startswith("@"):
            return [Completion(name, "action", "action", f"`[[@{name}:key|…]]`") for name in core.action_names()]
        if ":" in head:
            return []
        return [
            Completion(name, "type", "type", doc or TYPE_DOCS.get(name, ""), f"{name}:")
            for name, doc in core.type_names()
        ]
    if is_action:
        return []
    type_name = (match.group(2) if match and match.group(3) else None) or "respond"
    fragment = re.split(r",", rest)[-1].lstrip()
    if "=" in fragment:
        key = fragment.split("=", 1)[0].strip()
        return _values(analysis, key)
    used = {part.split("=", 1)[0].strip() for part in rest.split(",")[:-1] if "=" in part}
    return [
        Completion(key, "option", core.option_family(key), _option_doc(analysis, key), f"{key}=")
        for key in core.option_keys(type_name)
        if key not in used
    ]


def _option_doc(analysis: Analysis, key: str) -> str:
    doc = opts.SLOT_OPTIONS[key].doc if key in opts.SLOT_OPTIONS else ""
    if key == "use_tools" and analysis.tools and analysis.tools_file:
        doc += f"\n\nTools in {analysis.tools_file.name}: " + ", ".join(f"`{t.name}`" for t in analysis.tools)
    return doc


def _values(analysis: Analysis, key: str) -> list[Completion]:
    option = opts.SLOT_OPTIONS.get(key)
    if option is not None and option.choices:
        return [Completion(value, "value", key) for value in option.choices]
    if option is not None and option.names_tools:
        return _tool_items(analysis)
    return []


def _tool_items(analysis: Analysis) -> list[Completion]:
    where = analysis.tools_file.name if analysis.tools_file else ""
    return [
        Completion(t.name, "tool", f"tool{t.signature}" + (" @readonly" if t.readonly else ""), f"{t.summary}\n\n{where}".strip())
        for t in analysis.tools
    ]


def _variables(analysis: Analysis, before: int) -> list[Completion]:
    where = analysis.context_file.name if analysis.context_file else ""
    items = [Completion(name, "variable", f"context ({where})") for name in analysis.context_names]
    seen = set(analysis.context_names)
    for span in slot_spans(analysis.toks):
        if span.end > before:
            break
        key = span.first("slot.key")
        if key and key.text not in seen:
            seen.add(key.text)
            items.append(Completion(key.text, "variable", "answer of an earlier slot"))
    return items


# ---------------------------------------------------------------------------
# hover


@dataclass(frozen=True)
class Hover:
    start: int
    end: int
    markdown: str


def hover(analysis: Analysis, offset: int) -> Hover | None:
    span = next((s for s in slot_spans(analysis.toks) if s.start <= offset < s.end), None)
    if span is None or analysis.program is None:
        return None
    line, column = analysis.lines.position(span.start)
    views = (v for seg in core.segments(analysis.program) for v in seg.slots)
    view = next((v for v in views if (v.line, v.column) == (line, column) and not v.in_include), None)
    if view is None:
        return None
    guards: list[str] = []
    for segment in core.segments(analysis.program):
        if view in segment.slots:
            guards = [v.key for v in segment.slots[: segment.slots.index(view)] if v.is_guard and not v.in_include]
    return Hover(span.start, span.end, plan_markdown(view, analysis, guards))


def clamp(ceiling: int | None, limit: int | None, asked: Any, option: str, unit: str) -> str:
    return limit_text(ceiling, limit, asked, option, unit, show_asked=True)


def plan_markdown(view: core.SlotView, analysis: Analysis, earlier_guards: Sequence[str] = ()) -> str:
    if view.is_action:
        lines = [f"**action `{view.type_name}`**" + (f" → `{view.key}`" if view.key else "")]
        if core.is_side_effecting_action(view.type_name[1:]):
            lines.append("- side effects: pending guards are joined before it runs")
        return "\n".join(lines)
    if view.is_guard:
        when = view.control.get("when", True)
        return "\n".join(
            [
                f"**guard `{view.key}`**: halts the run when `triggered` is {'true' if when is not False else 'false'}",
                "- judges the text above it; starts when reached and runs beside what follows",
                f"- joined before: {core.guard_joins()}",
            ]
        )
    lines = [
        f"**slot `{view.key}`**: `{view.type_name}`, {quantity(view.quantifier)}, "
        + ("required" if view.required else "may be null")
    ]
    if view.positional:
        family = {"pick": "choices", "score": "levels"}.get(view.type_name, "positional")
        lines.append(f"- {family}: {' | '.join(view.positional)}")
    for family, items in (("type options", view.type_options), ("model settings", view.settings)):
        if items:
            lines.append(f"- {family}: " + ", ".join(f"`{k}={v}`" for k, v in items.items()))
    if view.dynamic:
        lines.append("- `{{ … }}` option values are rendered when the slot runs")
    control = view.control
    if control.get("use_tools") is True or "max_iter" in control or "max_calls" in control:
        c = core.ceiling()
        lines.append(
            f"- limits: {clamp(c.requests, view.request_limit, control.get('max_iter'), 'max_iter', 'requests')} · "
            f"{clamp(c.tool_calls, view.tool_calls_limit, control.get('max_calls'), 'max_calls', 'tool calls')} · "
            f"{c.output_tokens:,} output tokens"
        )
    if control.get("use_tools") is True:
        if analysis.tools:
            names = ", ".join(f"`{t.name}`" for t in analysis.tools)
            lines.append(f"- tools: {names} (from {analysis.tools_file.name if analysis.tools_file else 'the tools file'})")
            if "max_iter" in control:
                lines.append("- the last permitted request offers no tools, so the model must answer")
            if not all(t.readonly for t in analysis.tools):
                lines.append("- waits for pending guards before it starts (not every tool is `@readonly`)")
        else:
            lines.append("- tools: the ones passed at run time (no tools file found beside the template)")
    if earlier_guards:
        names = ", ".join(f"`{g}`" for g in earlier_guards)
        lines.append(f"- guards that may still be running beside it: {names} (joined before its first streamed token)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# document symbols


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # "segment" | "slot" | "guard" | "action"
    detail: str
    start: int
    end: int
    select_start: int
    select_end: int
    children: tuple[Symbol, ...] = ()


def symbols(analysis: Analysis) -> list[Symbol]:
    """Segments (split at checkpoints) holding their slots, from the tokens."""
    text = analysis.text
    cuts = [(0, None)] + [(t.start, t) for t in analysis.toks if t.role == "checkpoint"]
    spans = slot_spans(analysis.toks)
    out: list[Symbol] = []
    for index, (start, checkpoint) in enumerate(cuts):
        end = cuts[index + 1][0] if index + 1 < len(cuts) else len(text)
        name = f"segment {index}"
        if checkpoint is not None:
            label = re.sub(r"<[^>]*>", "", checkpoint.text).strip()
            name += f" {label!r}" if label else ""
        children = tuple(_slot_symbol(s) for s in spans if start <= s.start < end)
        select_end = checkpoint.end if checkpoint else min(end, start + 1)
        detail = f"{len(children)} slot{'s' if len(children) != 1 else ''}"
        out.append(Symbol(name, "segment", detail, start, end, start, select_end, children))
    return out


def _slot_symbol(span: SlotSpan) -> Symbol:
    key = span.first("slot.key")
    type_tok = span.first("slot.type")
    action = span.first("slot.action")
    if action is not None:
        name = key.text if key else f"@{action.text}"
        return Symbol(name, "action", f"@{action.text}", span.start, span.end, *(_select(key or action)))
    type_name = type_tok.text if type_tok else "respond"
    kind = "guard" if type_name == "halt" else "slot"
    label = key.text if key else "?"
    return Symbol(label, kind, type_name, span.start, span.end, *(_select(key) if key else (span.start, span.end)))


def _select(tok: Tok) -> tuple[int, int]:
    return tok.start, tok.end


# ---------------------------------------------------------------------------
# semantic tokens (highlighting for editors without TextMate grammars)


@dataclass(frozen=True)
class SemanticToken:
    start: int  # offset; one token never spans a line break
    end: int
    type_index: int  # into SEMANTIC_TYPES


def semantic_tokens(analysis: Analysis) -> list[SemanticToken]:
    """The scanner's tokens with their roles' semantic types, cut at line breaks and
    trimmed of the whitespace some tokens carry (`, `, `[[ `)."""
    out: list[SemanticToken] = []
    for tok in analysis.toks:
        semantic = ROLES[tok.role].semantic if tok.role in ROLES else ""
        if not semantic:
            continue
        index = SEMANTIC_TYPES.index(semantic)
        offset = tok.start
        for piece in tok.text.split("\n"):
            stripped = piece.strip()
            if stripped:
                start = offset + len(piece) - len(piece.lstrip())
                out.append(SemanticToken(start, start + len(stripped), index))
            offset += len(piece) + 1
    return out
