"""The AST: frozen dataclasses, the single source of truth for runtime, CLI and errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Union


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
    value_pos: Pos | None = field(default=None, compare=False)  # where the value starts (a keyed option's pos is its key's)


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
    # Where the type name and the key were written: the check stage points its errors
    # there. `type_pos` is None for `[[name]]` (no type written: free text).
    type_pos: Pos | None = field(default=None, compare=False)
    key_pos: Pos | None = field(default=None, compare=False)

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
    # `[[@name]]` stores its value under `name`: a key nobody wrote, which may recur
    # (`[[@history]]` in every segment) where a written key may not.
    implicit_key: bool = False


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


def children(node: Node) -> tuple[Node, ...]:
    """The nodes directly inside `node`, in document order (all branches of an `If`)."""
    if isinstance(node, (Instructions, Turn, Together)):
        return node.body
    if isinstance(node, If):
        return tuple(n for branch in node.branches for n in branch.body)
    return ()


def walk(nodes: tuple[Node, ...]) -> Iterator[Node]:
    """Every node, depth first, in document order."""
    for node in nodes:
        yield node
        yield from walk(children(node))


class NodeVisitor:
    """Calls `visit_<NodeClass>(node)` for a node, else `generic_visit`, which visits
    the children (as Jinja's `NodeVisitor` does)."""

    def visit(self, node: Node) -> Any:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node: Node) -> Any:
        for child in children(node):
            self.visit(child)
        return None

    def visit_all(self, nodes: tuple[Node, ...]) -> None:
        for node in nodes:
            self.visit(node)
