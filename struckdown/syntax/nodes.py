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
    # Where each joined piece starts, as (offset in `source`, position in its file).
    # Pieces are joined across a dropped comment, an include, or a Jinja block that
    # holds no structure; empty when the text is one piece starting at `pos`.
    pieces: tuple[tuple[int, Pos], ...] = field(default=(), compare=False)

    def joined(self, other: Text) -> Text:
        """This text followed by `other`, keeping where every piece came from."""
        shift = len(self.source)
        pieces = (self.pieces or ((0, self.pos),)) + tuple(
            (shift + offset, pos) for offset, pos in (other.pieces or ((0, other.pos),))
        )
        return Text(self.source + other.source, self.pos, pieces)

    def position_at(self, offset: int) -> Pos:
        """The file position of character `offset` of `source`."""
        start, pos = 0, self.pos
        for piece_start, piece_pos in self.pieces:
            if piece_start <= offset:
                start, pos = piece_start, piece_pos
        before = self.source[start:offset]
        newlines = before.count("\n")
        if newlines == 0:
            return Pos(pos.line, pos.column + len(before), pos.filename)
        return Pos(pos.line + newlines, len(before) - before.rfind("\n"), pos.filename)


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
