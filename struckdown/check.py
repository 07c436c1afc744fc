"""The check stage (syntax → **check** → plan): a parsed template against an Environment.

Everything the grammar cannot know is validated here, with positioned
TemplateSyntaxErrors, before any model call: type names and their options,
option values, actions, every piece of Jinja (texts, conditions, `{{ }}` option
values), and `<together>` members that refer to each other. It reads the AST
and the Environment's registries and builds nothing: the plan stage builds each
slot's output type (and positions the error of a bad combination of options).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import slot_options as opts
from .errors import TemplateSyntaxError, close_match
from .render import jinja_syntax_error
from .syntax.nodes import Action, If, JinjaValue, NodeVisitor, Option, Pos, Slot, Template, Text, Together
from .syntax.source import SourceMap
from .types.legacy import LEGACY_NAMES

if TYPE_CHECKING:
    from .env_view import EnvironmentView

_JINJA_NEWLINE = re.compile(r"\r\n|\r|\n")

#: Text with this many `{% %}` tags is compiled to Python at check time, so Python's
#: nesting limit (20 nested `{% for %}` blocks) fails the parse, not the run. With fewer
#: tags the limit cannot be reached, and the text is compiled on first render.
_COMPILE_AT = 10


def check_template(template: Template, env: EnvironmentView) -> None:
    """Raise the first problem of `template` (in document order) as a TemplateSyntaxError."""
    _Checker(template, env).visit_all(template.nodes)


class _Checker(NodeVisitor):
    def __init__(self, template: Template, env: EnvironmentView) -> None:
        self.src = SourceMap(template.source, template.filename)
        self.env = env

    def error(self, message: str, pos: Pos, hint: str | None = None) -> TemplateSyntaxError:
        # `pos` may lie in an included file
        return self.src.for_file(pos.filename).error(message, pos.line, pos.column, hint)

    # -- text and conditions ---------------------------------------------------
    def visit_Text(self, node: Text) -> None:
        renderer = self.env.renderer
        try:
            renderer.referenced_names(node.source)  # parses and walks the Jinja AST
            if node.source.count("{%") >= _COMPILE_AT:
                renderer.compile_text(node.source)
            return
        except jinja_syntax_error() as exc:
            line_start = _jinja_line_offset(node.source, exc.lineno or 1)
            pos = node.position_at(line_start)
            unknown = self.unknown_call(exc.message or "", node.source, line_start)
            if unknown is not None:  # at the filter's (or test's) own name, with a close match
                where, hint = unknown
                failure = self.error(f"invalid Jinja: {exc.message}", node.position_at(where) if where >= 0 else pos, hint)
            else:
                failure = self.error(f"invalid Jinja: {exc.message}", pos)
        except (RecursionError, SyntaxError):  # SyntaxError: Python's own nesting limits
            failure = self.error("Jinja nests too deeply", node.pos, "flatten the nested {% %} blocks or expressions")
        except Exception as exc:  # e.g. ValueError for an integer literal of 5,000 digits
            failure = self.error(f"invalid Jinja: {type(exc).__name__}: {' '.join(str(exc).split())}", node.pos)
        raise failure  # outside the except: the error carries no foreign context (Dask pickles it)

    def expression(self, expression: str, pos: Pos) -> frozenset[str]:
        try:
            return self.env.renderer.expression_names(expression)
        except jinja_syntax_error() as exc:
            message = f"invalid Jinja expression: {exc.message}"
            src = self.src.for_file(pos.filename)
            start = _offset_of(src.text, pos)
            unknown = self.unknown_call(exc.message or "", src.text, start)
            if unknown is not None:
                where, hint = unknown
                line, column = _line_column(src.text, where) if where >= 0 else (pos.line, pos.column)
                raise src.error(message, line, column, hint) from None
        except (RecursionError, SyntaxError):  # SyntaxError: Python's own nesting limits
            message = "Jinja expression nests too deeply"
        except Exception as exc:  # e.g. ValueError for an integer literal of 5,000 digits
            message = f"invalid Jinja expression: {type(exc).__name__}: {' '.join(str(exc).split())}"
        raise self.error(message, pos)

    def unknown_call(self, message: str, source: str, start: int) -> tuple[int, str] | None:
        """For Jinja's "No filter named 'uppr'": where the name is in `source` (searched from
        `start`; -1 if not found) and a hint with the closest known filter or test."""
        import difflib

        found = re.match(r"No (filter|test) named '([^']+)'", message)
        if found is None:
            return None
        kind, name = found.groups()
        pattern = re.compile(
            rf"\|\s*({re.escape(name)})\b" if kind == "filter" else rf"\bis\s+(?:not\s+)?({re.escape(name)})\b"
        )
        spot = pattern.search(source, start) or pattern.search(source)
        sandbox = self.env.renderer.sandbox
        known = sorted(n for n in (sandbox.filters if kind == "filter" else sandbox.tests) if not n.startswith("_"))
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"Jinja's {kind}s: {', '.join(known)}"
        return (spot.start(1) if spot else -1), hint

    def option_names(self, options: tuple[Option, ...]) -> frozenset[str]:
        names: frozenset[str] = frozenset()
        for option in options:
            if isinstance(option.value, JinjaValue):
                names |= self.expression(option.value.expression, option.value_pos or option.pos)
        return names

    def visit_If(self, node: If) -> None:
        for branch in node.branches:
            if branch.condition is not None:
                self.expression(branch.condition, branch.pos)
        self.generic_visit(node)

    # -- slots -----------------------------------------------------------------
    def visit_Slot(self, slot: Slot) -> None:
        self.option_names(slot.options)  # the Jinja inside the slot first, as it is written first
        types = self.env.types
        if slot.type_pos is None and slot.key in types and slot.key not in LEGACY_NAMES:  # [[poem]]: a 0.x answer name
            raise self.error(
                f"[[{slot.key}]] is ambiguous: {slot.key!r} is a type name",
                slot.key_pos or slot.pos,
                f"name the answer: [[{slot.key}:my_{slot.key}]], or pick another name: [[{slot.key}_answer]]",
            )
        type_name = slot.type_name
        if type_name not in types:
            raise self.error(
                f"unknown type {type_name!r}", slot.type_pos or slot.pos, close_match(type_name, types.names(), "known types")
            )
        positional = [o for o in slot.options if o.key is None]
        if positional and not types.takes_positional(type_name):
            hint = (
                f"did you mean [[{slot.key}:answer|…]]?"
                if type_name == "respond" and slot.key in types
                else f"{type_name} slots take only key=value options"
            )
            flag = _close_flag(positional[0])
            if flag is not None:
                hint = f"did you mean {flag!r}? (a bare {flag} marks the slot {flag}); {hint}"
            raise self.error(f"{type_name} takes no positional options", positional[0].pos, hint)
        if type_name == "pick" and not positional:
            raise self.error("pick needs choices: [[pick:name|a, b, c]]", slot.pos)
        self.distinct_choices(positional)
        type_opts = types.allowed_options(type_name)
        valid = opts.valid_keys(type_name, type_opts)
        for option in slot.options:
            if option.key is None:
                continue
            if option.key not in valid or (
                option.key in opts.TYPE_OPTIONS and option.key != "required" and option.key not in type_opts
            ):
                raise self.error(
                    f"unknown option {option.key!r} for a {type_name} slot",
                    option.pos,
                    close_match(option.key, valid, "valid options"),
                )
            try:
                opts.check_option(option.key, option.value)
            except ValueError as exc:
                raise self.error(f"bad value for {option.key}: {exc}", option.pos) from None
        clash = opts.combination_problem(slot.options)
        if clash is not None:
            raise self.error(clash[0], clash[1].pos)

    def distinct_choices(self, choices: list[Option]) -> None:
        """A choice given twice is an error at the second: answers match choices ignoring
        case, so `a, A` is the same choice twice."""
        seen: dict[str, str] = {}
        for choice in choices:
            if not isinstance(choice.value, str):
                continue
            folded = choice.value.strip().casefold()
            if folded in seen:
                same = "" if seen[folded] == choice.value.strip() else f" (the same as {seen[folded]!r}: choices ignore case)"
                raise self.error(
                    f"choice {choice.value.strip()!r} is given twice{same}", choice.pos, "remove the second one"
                )
            seen[folded] = choice.value.strip()

    # -- actions and blocks ------------------------------------------------------
    def visit_Action(self, node: Action) -> None:
        self.option_names(node.options)
        actions = self.env.actions
        if node.name not in actions:
            raise self.error(
                f"unknown action @{node.name}", node.pos, f"known actions: {', '.join('@' + n for n in actions.names())}"
            )
        try:
            actions.get(node.name).check(node)
        except ValueError as exc:
            raise self.error(f"@{node.name}: {exc}", node.pos) from None

    def visit_Together(self, block: Together) -> None:
        self.generic_visit(block)  # members first: their own errors come before a clash
        siblings = {n.key for n in block.body if isinstance(n, Slot)}
        for node in block.body:
            names: Any = frozenset()
            if isinstance(node, Text):
                names = self.env.renderer.referenced_names(node.source)
            elif isinstance(node, Slot):
                names = self.option_names(node.options)
            clash = sorted(names & siblings)
            if clash:
                raise self.error(
                    f"inside <together>, {clash[0]!r} refers to a sibling slot",
                    node.pos,
                    "slots in a <together> block run at the same time and cannot see each other; "
                    "move the reference after </together>",
                )


def _close_flag(option: Option) -> str | None:
    """`requird` for `required`: a bare word that is a typo of a flag option."""
    import difflib

    if not isinstance(option.value, str) or option.quoted:
        return None
    found = difflib.get_close_matches(option.value.strip().lower(), _FLAGS, n=1, cutoff=0.75)
    return found[0] if found else None


_FLAGS = ["required"]


def _offset_of(text: str, pos: Pos) -> int:
    """The index in `text` of a 1-based (line, column) position (lines end at "\n")."""
    offset = 0
    for _ in range(pos.line - 1):
        found = text.find("\n", offset)
        if found < 0:
            return 0
        offset = found + 1
    return offset + max(pos.column - 1, 0)


def _line_column(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


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
