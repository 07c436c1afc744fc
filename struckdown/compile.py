"""AST → Program: segments, their dependencies, and one plan per slot. Pure and cached.

A Program is everything about a template that does not depend on a run's
context, model or tools, so batch parses and plans once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .render import expression_names, referenced_names
from .syntax import parse_template
from .syntax.checks import walk
from .syntax.nodes import (
    Action,
    Checkpoint,
    If,
    Instructions,
    JinjaValue,
    Node,
    Option,
    Slot,
    Template,
    Text,
    Together,
)
from .syntax.options import CONTROL_OPTIONS, MODEL_SETTINGS, TYPE_OPTIONS


@dataclass(frozen=True)
class SlotPlan:
    """What a slot asks for, split by option family. Jinja-valued options stay
    `JinjaValue` until the slot runs."""

    slot: Slot
    positional: tuple[Any, ...]
    type_options: dict[str, Any]
    settings: dict[str, Any]
    control: dict[str, Any]
    dynamic: bool

    @property
    def key(self) -> str:
        return self.slot.key

    @property
    def use_tools(self) -> bool:
        return bool(self.control.get("use_tools", False))


@dataclass(frozen=True)
class Segment:
    index: int
    name: str | None
    nodes: tuple[Node, ...]
    keys: tuple[str, ...]  # answers it defines, in document order
    reads: frozenset[str]  # names it (and the instructions it inherits) read


@dataclass(frozen=True)
class Program:
    template: Template
    segments: tuple[Segment, ...]
    keys: tuple[str, ...]  # every answer key in template order
    plans: dict[Slot, SlotPlan] = field(repr=False)
    guard_order: dict[str, int] = field(repr=False)  # guard key → document position
    compiled: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # text → Jinja template

    def plan(self, slot: Slot) -> SlotPlan:
        return self.plans[slot]

    def segment_of(self, key: str) -> int:
        for segment in self.segments:
            if key in segment.keys:
                return segment.index
        raise KeyError(key)

    def slots(self) -> list[Slot]:
        return [n for seg in self.segments for n in walk(seg.nodes) if isinstance(n, Slot)]


def plan_slot(slot: Slot) -> SlotPlan:
    positional: list[Any] = []
    families: dict[str, dict[str, Any]] = {"type": {}, "settings": {}, "control": {}}
    dynamic = False
    for option in slot.options:
        dynamic = dynamic or isinstance(option.value, JinjaValue)
        if option.key is None:
            positional.append(option.value)
        else:
            families[_family(option)][option.key] = option.value
    families["type"].pop("required", None)
    return SlotPlan(
        slot,
        tuple(positional),
        families["type"],
        families["settings"],
        families["control"],
        dynamic,
    )


def _family(option: Option) -> str:
    assert option.key is not None
    if option.key in MODEL_SETTINGS:
        return "settings"
    if option.key in TYPE_OPTIONS:
        return "type"
    assert option.key in CONTROL_OPTIONS
    return "control"


def node_reads(node: Node) -> frozenset[str]:
    """Names a single node reads when it runs (not its children)."""
    if isinstance(node, Text):
        return referenced_names(node.source)
    if isinstance(node, (Slot, Action)):
        names: frozenset[str] = frozenset()
        for option in node.options:
            if isinstance(option.value, JinjaValue):
                names |= expression_names(option.value.expression)
        return names
    if isinstance(node, If):
        names = frozenset()
        for branch in node.branches:
            if branch.condition is not None:
                names |= expression_names(branch.condition)
        return names
    return frozenset()


def reads_of(nodes: Sequence[Node]) -> frozenset[str]:
    names: frozenset[str] = frozenset()
    for node in walk(tuple(nodes)):
        names |= node_reads(node)
    return names


def _split_segments(nodes: tuple[Node, ...]) -> list[tuple[str | None, list[Node]]]:
    parts: list[tuple[str | None, list[Node]]] = [(None, [])]
    for node in nodes:
        if isinstance(node, Checkpoint):
            parts.append((node.name, []))
        else:
            parts[-1][1].append(node)
    return parts


def carried_instructions(nodes: Sequence[Node]) -> list[Node]:
    """The parts of a segment that shape later segments: global instructions and the
    conditions around them."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Instructions) and node.scope == "global":
            out.append(node)
        elif isinstance(node, If):
            if any(isinstance(n, Instructions) and n.scope == "global" for b in node.branches for n in walk(b.body)):
                out.append(node)
    return out


def build_program(template: Template) -> Program:
    segments: list[Segment] = []
    keys: list[str] = []
    plans: dict[Slot, SlotPlan] = {}
    guard_order: dict[str, int] = {}
    carried_reads: frozenset[str] = frozenset()
    for index, (name, nodes) in enumerate(_split_segments(template.nodes)):
        seg_keys: list[str] = []
        reads = carried_reads
        for node in walk(tuple(nodes)):
            if isinstance(node, (Slot, Action)) and node.key is not None and node.key not in seg_keys:
                seg_keys.append(node.key)
            if isinstance(node, Slot):
                plans[node] = plan_slot(node)
            reads |= node_reads(node)
        segments.append(Segment(index, name, tuple(nodes), tuple(seg_keys), reads))
        keys += seg_keys
        carried_reads |= reads_of(carried_instructions(nodes))
    position = 0
    for segment in segments:
        for node in segment.nodes:
            position += 1
            inner = walk(node.body) if isinstance(node, Together) else walk((node,))
            for sub in inner:
                if isinstance(sub, Slot) and sub.is_guard:
                    # guards inside <together> count as starting with the block
                    guard_order.setdefault(sub.key, position)
                if not isinstance(node, Together):
                    position += 1
    return Program(template, tuple(segments), tuple(keys), plans, guard_order)


@lru_cache(maxsize=256)
def _compile_cached(source: str, template_path: str | None, include_paths: tuple[str, ...], stamp: tuple[Any, ...]) -> Program:
    template = parse_template(source, template_path=template_path, include_paths=include_paths)
    return build_program(template)


def _stamp(template_path: str | None, include_paths: tuple[str, ...]) -> tuple[Any, ...]:
    """Includes are read from disk: a changed include must not hit a stale cache entry."""
    base = Path(template_path).resolve().parent if template_path else Path.cwd()
    return (str(base), include_paths)


def compile_template(
    source: str,
    *,
    template_path: str | os.PathLike[str] | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
) -> Program:
    path = str(template_path) if template_path is not None else None
    incs = tuple(str(p) for p in include_paths)
    stamp = _stamp(path, incs)
    program = _compile_cached(source, path, incs, stamp)
    if program.template.included_files and _includes_changed(program):
        _compile_cached.cache_clear()
        program = _compile_cached(source, path, incs, stamp)
    return program


def _includes_changed(program: Program) -> bool:
    for name, mtime in program.template.included_files:
        try:
            if os.stat(name).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def parse(
    template: str,
    *,
    template_path: str | os.PathLike[str] | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
) -> Program:
    """Parse and plan a template without running it (cached by text).

    Raises TemplateSyntaxError, with line and column, for anything wrong with it.
    """
    return compile_template(template, template_path=template_path, include_paths=include_paths)
