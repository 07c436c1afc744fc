"""Everything editor support reads from the rest of struckdown, in one place.

The highlighters, the language server and `sd preview` import the parser, the
Program, the type registry and the linter only through this module, so that a
change inside `syntax/`, `check.py`, `plan.py` or `types/` is answered by
re-pointing the functions here and nothing else. Names (types, actions) come from
the default Environment, the one `sd check` and `sd run` use.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------
# the grammar


@dataclass(frozen=True)
class Terminal:
    name: str
    regex: str  # Python `re` syntax, as Lark compiles it


@lru_cache(maxsize=1)
def terminals() -> tuple[Terminal, ...]:
    """Every terminal of `grammar/struckdown.lark`, in the order Lark's lexer tries them
    (priority, then width, then pattern length, then name)."""
    from ..syntax.parser import _lark

    defs = sorted(
        _lark().terminals,
        key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name),
    )
    # Lark writes the grammar's `\n` as a newline character; the escape means the same
    return tuple(Terminal(t.name, t.pattern.to_regexp().replace("\n", "\\n")) for t in defs)


@dataclass(frozen=True)
class Token:
    """A token of the Lark lexer with the grammar rule it sits in (`head`, `keyed`, …)."""

    type: str
    text: str
    start: int  # offset in the source
    end: int
    line: int  # 1-based
    column: int  # 1-based
    rule: str
    index_in_rule: int


def lark_tokens(source: str) -> list[Token]:
    """The tokens the one parser reads, in document order (raises on a syntax error)."""
    from lark import Token as LarkToken
    from lark import Tree

    from ..syntax.parser import _lark

    tree = _lark().parse(source)
    found: list[Token] = []

    def visit(node: Tree[Any]) -> None:
        for index, child in enumerate(node.children):
            if isinstance(child, LarkToken):
                start = child.start_pos or 0
                found.append(
                    Token(
                        child.type, str(child), start, start + len(child), child.line or 1,
                        child.column or 1, str(node.data), index,
                    )
                )
            else:
                visit(child)

    visit(tree)
    return found


# ---------------------------------------------------------------------------
# parsing and checking


@dataclass(frozen=True)
class Problem:
    """A diagnostic of `sd check`: 1-based line and column; `filename` when it lies in an include."""

    line: int
    column: int
    severity: str  # "error" | "warning"
    message: str
    hint: str | None = None
    filename: str | None = None


def _env() -> Any:
    from ..environment import default_environment

    return default_environment()


def compile_source(source: str, path: Path | None) -> Any:
    """The Program of a template text (raises TemplateSyntaxError)."""
    return _env().parse(source, template_path=path)


def check_source(
    source: str, path: Path | None, *, context_names: set[str] | None, tools_given: bool
) -> tuple[Any | None, list[Problem]]:
    """What `sd check` reports for this text: a parse error, or the linter's findings."""
    from ..errors import TemplateSyntaxError
    from ..lint import Linter

    try:
        program = compile_source(source, path)
    except TemplateSyntaxError as exc:
        elsewhere = exc.filename if exc.filename and path and Path(exc.filename).resolve() != path.resolve() else None
        return None, [Problem(exc.line, exc.column, "error", exc.message, exc.hint, elsewhere)]
    linter = Linter(str(path) if path else "<template>", program, source)
    if context_names is not None:
        linter.undefined_variables(context_names)
    for segment in program.segments:
        linter.guard_placement(segment.nodes)
    linter.slot_options(tools_given)
    problems = [
        Problem(d.line, d.column, d.severity, d.message, d.hint, d.path if path and d.path != str(path) else None)
        for d in linter.found
    ]
    return program, sorted(problems, key=lambda p: (p.line, p.column))


# ---------------------------------------------------------------------------
# the Program, as editors see it


@dataclass(frozen=True)
class SlotView:
    key: str
    type_name: str
    line: int
    column: int
    in_include: bool
    is_guard: bool
    is_action: bool
    quantifier: tuple[int, int | None] | None
    required: bool
    positional: tuple[str, ...]
    type_options: dict[str, str]
    settings: dict[str, str]
    control: dict[str, Any]
    dynamic: bool
    request_limit: int | None = None  # the plan's clamped limits
    tool_calls_limit: int | None = None


@dataclass(frozen=True)
class SegmentView:
    index: int
    name: str | None
    slots: tuple[SlotView, ...]


def _value(value: Any) -> str:
    from ..syntax.nodes import JinjaValue

    if isinstance(value, JinjaValue):
        return "{{ " + value.expression + " }}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def segments(program: Any) -> list[SegmentView]:
    from ..syntax.nodes import Action, Slot, walk

    out: list[SegmentView] = []
    filename = program.template.filename
    for segment in program.segments:
        views: list[SlotView] = []
        for node in walk(segment.nodes):
            in_include = node.pos.filename != filename if hasattr(node, "pos") else False
            if isinstance(node, Slot):
                plan = program.plans[node]
                views.append(
                    SlotView(
                        node.key, node.type_name, node.pos.line, node.pos.column, in_include, node.is_guard,
                        False, node.quantifier, node.required, tuple(_value(v) for v in plan.positional),
                        {k: _value(v) for k, v in plan.type_options.items()},
                        {k: _value(v) for k, v in plan.settings.items()},
                        dict(plan.control), plan.dynamic, plan.limits.request_limit, plan.limits.tool_calls_limit,
                    )
                )
            elif isinstance(node, Action):
                views.append(
                    SlotView(
                        node.key or "", "@" + node.name, node.pos.line, node.pos.column, in_include, False, True,
                        None, False, tuple(_value(o.value) for o in node.options if o.key is None),
                        {o.key: _value(o.value) for o in node.options if o.key is not None}, {}, {}, False,
                    )
                )
        out.append(SegmentView(segment.index, segment.name, tuple(views)))
    return out


# ---------------------------------------------------------------------------
# names a template may use


def type_names() -> list[tuple[str, str | None]]:
    """(name, description) of every registered type, builtins first; the names kept only
    for 0.x templates (docs/migration.md) are accepted but not offered."""
    from ..types.legacy import ALIASES, LEGACY_POSITIONAL, LEGACY_TEXT_TYPES

    legacy = {*ALIASES, *LEGACY_POSITIONAL, *LEGACY_TEXT_TYPES, "date_rule", "chunked_conversation"}
    registry = _env().types
    out: list[tuple[str, str | None]] = []
    for name in registry.names():
        if name in legacy and registry.custom(name) is None:
            continue
        custom = registry.custom(name)
        out.append((name, custom.description if custom else None))
    return out


def option_keys(type_name: str) -> list[str]:
    """Every keyed option a slot of this type accepts, as the parser checks them."""
    from .. import slot_options as opts

    registry = _env().types
    if type_name not in registry:
        return []
    return opts.valid_keys(type_name, registry.allowed_options(type_name))


def option_family(key: str) -> str:
    from .. import slot_options as opts

    option = opts.SLOT_OPTIONS.get(key)
    family = option.family if option is not None else "control"
    return {"settings": "model setting", "type": "type option"}.get(family, "control option")


def action_names() -> list[str]:
    return sorted(_env().actions.names())


def is_side_effecting_action(name: str) -> bool:
    actions = _env().actions
    return name in actions and bool(actions.get(name).side_effects)


# ---------------------------------------------------------------------------
# limits and guards


@dataclass(frozen=True)
class Limits:
    requests: int | None
    tool_calls: int | None
    output_tokens: int | None


def ceiling() -> Limits:
    """The default Environment's per-slot ceiling."""
    from ..limits import Limits as Ceiling

    c = Ceiling.of(_env().limits)

    return Limits(c.request_limit, c.tool_calls_limit, c.output_tokens_limit)


def guard_joins() -> str:
    from ..explain.plan import GUARD_JOINS

    return GUARD_JOINS


# ---------------------------------------------------------------------------
# files next to a template (read, never executed)


def context_names(template: Path) -> tuple[Path | None, list[str]]:
    """The top-level keys of `name.json` / `name.yaml` / `name.yml` beside `name.sd`."""
    for suffix in (".json", ".yaml", ".yml"):
        candidate = template.with_suffix(suffix)
        if not candidate.is_file():
            continue
        try:
            text = candidate.read_text(encoding="utf-8")
            if suffix == ".json":
                data = json.loads(text)
            else:
                import yaml

                data = yaml.safe_load(text)
        except Exception:
            return candidate, []
        return candidate, [str(k) for k in data] if isinstance(data, dict) else []
    return None, []


@dataclass(frozen=True)
class ToolInfo:
    name: str
    signature: str
    summary: str
    readonly: bool


def find_tools_file(template: Path, configured: str | None = None) -> Path | None:
    """An explicit path, else `name_tools.py`, `name.tools.py` or `tools.py` beside the
    template, else the one `*tools.py` file in its folder."""
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else template.parent / path
    folder = template.parent
    for candidate in (folder / f"{template.stem}_tools.py", folder / f"{template.stem}.tools.py", folder / "tools.py"):
        if candidate.is_file():
            return candidate
    found = sorted(folder.glob("*tools.py"))
    return found[0] if len(found) == 1 else None


def tools_in(path: Path) -> list[ToolInfo]:
    """The public functions of a tools file, read with `ast` (editor support never runs it)."""
    try:
        module = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    return list(_tool_defs(module))


def _tool_defs(module: ast.Module) -> Iterator[ToolInfo]:
    for node in module.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        doc = (ast.get_docstring(node) or "").strip().splitlines()
        readonly = any(_decorator_name(d) == "readonly" for d in node.decorator_list)
        yield ToolInfo(node.name, f"({ast.unparse(node.args)})", doc[0] if doc else "", readonly)


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""
