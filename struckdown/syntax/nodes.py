"""The AST: frozen dataclasses, the single source of truth for runtime, CLI and errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union


@dataclass(frozen=True)
class Pos:
    line: int
    column: int
    filename: str | None = None


@dataclass(frozen=True)
class JinjaValue:
    """An option value written as `{{ expr }}`: evaluated when the slot runs."""

    expression: str


OptionValue = Union[str, int, float, bool, JinjaValue]


@dataclass(frozen=True)
class Option:
    key: str | None  # None for positional options
    value: OptionValue
    pos: Pos
    quoted: bool = False


@dataclass(frozen=True)
class Text:
    """Raw Jinja source, rendered when the run reaches it."""

    source: str
    pos: Pos


@dataclass(frozen=True)
class Slot:
    """A model-filled slot (guards included: `type_name == "halt"`)."""

    key: str
    type_name: str
    quantifier: tuple[int, int | None] | None
    required: bool
    options: tuple[Option, ...]
    pos: Pos

    @property
    def is_guard(self) -> bool:
        return self.type_name == "halt"


@dataclass(frozen=True)
class Action:
    """`[[@name:key|args]]`: a Python function, no model call."""

    name: str
    key: str | None
    options: tuple[Option, ...]
    pos: Pos


Scope = Literal["global", "local"]
Mode = Literal["append", "replace"]


@dataclass(frozen=True)
class Instructions:
    """`<system>` (kind="system") or `<header>` (kind="header") text with its modifiers."""

    kind: Literal["system", "header"]
    body: tuple[Node, ...]
    scope: Scope
    mode: Mode
    pos: Pos


@dataclass(frozen=True)
class Turn:
    """An explicit `<user>` or `<assistant>` turn (few-shot)."""

    role: Literal["user", "assistant"]
    body: tuple[Node, ...]
    pos: Pos


@dataclass(frozen=True)
class Checkpoint:
    name: str | None
    pos: Pos


@dataclass(frozen=True)
class Together:
    body: tuple[Node, ...]
    pos: Pos


@dataclass(frozen=True)
class Branch:
    condition: str | None  # None for `{% else %}`
    body: tuple[Node, ...]
    pos: Pos


@dataclass(frozen=True)
class If:
    """`{% if %}…{% elif %}…{% else %}…{% endif %}` around structure; evaluated when reached."""

    branches: tuple[Branch, ...]
    pos: Pos


Node = Union[Text, Slot, Action, Instructions, Turn, Checkpoint, Together, If]


@dataclass(frozen=True)
class Template:
    """A parsed template: top-level nodes, includes already inlined."""

    nodes: tuple[Node, ...]
    source: str
    filename: str | None = None
    included_files: tuple[tuple[str, int], ...] = field(default=())  # (path, mtime_ns)
