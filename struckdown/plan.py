"""The plan stage (syntax → check → **plan**): a checked template → Program.

A Program is everything about a template that does not depend on a run's
context, model or tools, so batch parses and plans once. Each slot gets a
`SlotPlan` (options split by family, the output type prebuilt when no option
waits for `{{ }}`, limits clamped against the Environment's ceiling); each
segment knows which earlier answers it waits for and which guards it holds.
The engine, `sd check` and `sd explain` read the plan; none re-derives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import slot_options as opts
from .actions import action_refs
from .limits import Limits, asks_above, clamp_limits
from .syntax.nodes import Action, Checkpoint, If, Instructions, JinjaValue, Node, Slot, Template, Text, walk
from .syntax.source import SourceMap

if TYPE_CHECKING:
    from .env_view import EnvironmentView
    from .render import Renderer
    from .types import OutputSpec


@dataclass(frozen=True)
class SlotPlan:
    """What a slot asks for, split by option family. Jinja-valued options stay
    `JinjaValue` until the slot runs; so does the output type of such a slot."""

    slot: Slot
    positional: tuple[Any, ...]
    type_options: dict[str, Any]
    settings: dict[str, Any]
    control: dict[str, Any]
    dynamic: bool
    built: OutputSpec | None = field(default=None, compare=False, repr=False)  # `spec`, once built
    limits: Limits = field(default_factory=Limits, compare=False)  # clamped against the Environment's ceiling
    asks_above_ceiling: bool = False  # max_iter/max_calls above that ceiling (warned at each run)
    #: a spec that cannot fail to build (a builtin without options): built at its first use,
    #: so checking a template (`sd check`) imports no pydantic for it (SPEC §28)
    deferred: Callable[[], OutputSpec] | None = field(default=None, compare=False, repr=False)
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # facts the run computes once

    @property
    def spec(self) -> OutputSpec | None:
        """The slot's output spec, prebuilt unless an option waits for `{{ }}` (None then)."""
        if self.built is None and self.deferred is not None:
            object.__setattr__(self, "built", self.deferred())  # the registry caches it: a race builds it once more
        return self.built

    @property
    def key(self) -> str:
        return self.slot.key

    @property
    def use_tools(self) -> bool:
        return bool(self.control.get("use_tools", "mcp" in self.control))  # mcp= implies use_tools

    @property
    def when(self) -> bool:
        """A guard's trip value (`when=false` trips on a false verdict)."""
        return bool(self.control.get("when", True))


@dataclass(frozen=True)
class Segment:
    index: int
    name: str | None
    nodes: tuple[Node, ...]
    keys: tuple[str, ...]  # answers it defines, in document order
    reads: frozenset[str]  # names it (and the instructions it inherits) read
    waits_for: tuple[str, ...] = ()  # answers of earlier segments it reads: it starts once they exist
    guards: tuple[str, ...] = ()  # its guard keys, in document order
    carried: tuple[Node, ...] = ()  # its global instructions (and the conditions around them)


@dataclass(frozen=True)
class Program:
    template: Template
    segments: tuple[Segment, ...]
    keys: tuple[str, ...]  # every answer key in template order
    plans: dict[Slot, SlotPlan] = field(repr=False)
    environment: EnvironmentView = field(repr=False, compare=False)
    compiled: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # text → Jinja template
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # facts computed on first use

    def plan(self, slot: Slot) -> SlotPlan:
        return self.plans[slot]

    def segment_of(self, key: str) -> int:
        for segment in self.segments:
            if key in segment.keys:
                return segment.index
        raise KeyError(key)

    def slots(self) -> list[Slot]:
        return list(self.plans)

    @property
    def needs_model(self) -> bool:
        """Whether running it calls a model (a template of text and actions does not)."""
        return bool(self.plans)

    @property
    def guards(self) -> tuple[str, ...]:
        return tuple(key for segment in self.segments for key in segment.guards)


def plan_slot(slot: Slot, env: EnvironmentView, src: SourceMap) -> SlotPlan:
    """Options split by family, the output type built now when no option waits for
    `{{ … }}` (so a bad combination, such as min > max, a bad pattern or max=ten on an
    int, fails at parse time), and the limits clamped against the Environment's ceiling."""
    positional, families, dynamic = opts.split_options(slot.options)
    deferred = None if dynamic else _plain_builtin(slot, positional, families["type"], env)
    spec = None if dynamic or deferred is not None else _output_type(slot, positional, families["type"], env, src)
    control = families["control"]
    max_iter, max_calls = _literal(control.get("max_iter")), _literal(control.get("max_calls"))
    if max_iter is None and max_calls is None:  # most slots: the ceiling as it is
        limits, above = Limits.of(env.limits), False
    else:
        limits = clamp_limits(env.limits, max_iter, max_calls, slot.key, warn=False)
        above = asks_above(env.limits, max_iter, max_calls)
    return SlotPlan(
        slot, positional, families["type"], families["settings"], control, dynamic, spec, limits, above, deferred
    )


def _plain_builtin(
    slot: Slot, positional: tuple[Any, ...], type_options: dict[str, Any], env: EnvironmentView
) -> Callable[[], OutputSpec] | None:
    """The spec's builder when nothing about it can fail: a builtin type (not one a user
    registered under its name) that takes no positional options, given no options and no
    quantifier. None for any other slot: its spec is built now, so a bad one fails here."""
    from .types.table import TYPES

    row = TYPES.get(slot.type_name)
    if row is None or row.positional or positional or type_options or slot.quantifier is not None:
        return None
    if env.types.custom(slot.type_name) is not None:
        return None
    from functools import partial

    from .types import TypeRequest, build_output

    return partial(build_output, TypeRequest(slot.type_name, (), {}, None, slot.required), env.types)


def _output_type(
    slot: Slot, positional: tuple[Any, ...], type_options: dict[str, Any], env: EnvironmentView, src: SourceMap
) -> OutputSpec:
    from .types import TypeBuildError, TypeRequest, build_output

    request = TypeRequest(slot.type_name, tuple(str(p) for p in positional), type_options, slot.quantifier, slot.required)
    try:
        return build_output(request, env.types)
    except (TypeBuildError, OverflowError, RecursionError) as exc:
        culprit = next((o for o in slot.options if o.key and o.key in str(exc)), None)
        message = " ".join(str(exc).split())  # pydantic's errors span lines
    pos = culprit.pos if culprit else slot.pos
    raise src.for_file(pos.filename).error(message, pos.line, pos.column)


def _literal(value: Any) -> int | None:
    return None if isinstance(value, JinjaValue) else value


def node_reads(node: Node, renderer: Renderer) -> frozenset[str]:
    """Names a single node reads when it runs (not its children)."""
    if isinstance(node, Text):
        return renderer.referenced_names(node.source)
    if isinstance(node, (Slot, Action)):
        names: frozenset[str] = frozenset()
        for option in node.options:
            if isinstance(option.value, JinjaValue):
                names |= renderer.expression_names(option.value.expression)
        return names
    if isinstance(node, If):
        names = frozenset()
        for branch in node.branches:
            if branch.condition is not None:
                names |= renderer.expression_names(branch.condition)
        return names
    return frozenset()


def reads_of(nodes: Sequence[Node], renderer: Renderer) -> frozenset[str]:
    names: frozenset[str] = frozenset()
    for node in walk(tuple(nodes)):
        names |= node_reads(node, renderer)
    return names


def _split_segments(nodes: tuple[Node, ...]) -> list[tuple[str | None, list[Node]]]:
    parts: list[tuple[str | None, list[Node]]] = [(None, [])]
    for node in nodes:
        if isinstance(node, Checkpoint):
            parts.append((node.name, []))
        else:
            parts[-1][1].append(node)
    return parts


def carried_instructions(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """The parts of a segment that shape later segments: global instructions and the
    conditions around them."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Instructions) and node.scope == "global":
            out.append(node)
        elif isinstance(node, If):
            if any(isinstance(n, Instructions) and n.scope == "global" for b in node.branches for n in walk(b.body)):
                out.append(node)
    return tuple(out)


def plan_program(template: Template, env: EnvironmentView) -> Program:
    segments: list[Segment] = []
    keys: list[str] = []
    plans: dict[Slot, SlotPlan] = {}
    carried_reads: frozenset[str] = frozenset()
    renderer, src = env.renderer, SourceMap(template.source, template.filename)
    for index, (name, nodes) in enumerate(_split_segments(template.nodes)):
        seg_keys: list[str] = []
        seen: set[str] = set()  # sets, not list scans or frozenset copies: linear in the slots
        guards: list[str] = []
        reading = set(carried_reads)
        for node in walk(tuple(nodes)):
            if isinstance(node, (Slot, Action)) and node.key is not None and node.key not in seen:
                seen.add(node.key)
                seg_keys.append(node.key)
            if isinstance(node, Slot):
                plans[node] = plan_slot(node, env, src)
                if node.is_guard:
                    guards.append(node.key)
            reading |= node_reads(node, renderer) | action_refs(node)  # [[@search|topic]] waits for topic
        reads = frozenset(reading)
        earlier = set(keys)
        waits_for = tuple(sorted(reads & earlier))
        carried = carried_instructions(nodes)
        segments.append(Segment(index, name, tuple(nodes), tuple(seg_keys), reads, waits_for, tuple(guards), carried))
        keys += [k for k in seg_keys if k not in earlier]  # a keyless [[@history]] may recur in segments
        carried_reads |= reads_of(carried, renderer)
    return Program(template, tuple(segments), tuple(keys), plans, env)
