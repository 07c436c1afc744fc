"""Template text → AST (stage one of three: syntax → check → plan).

One Lark grammar (`grammar/struckdown.lark`) does the parsing; this module turns
its tree into frozen AST nodes, inlines includes and checks what is syntax but
no single grammar rule can say: nesting rules, a quantifier's numbers, an option
given twice, duplicate keys. It knows no types, actions or Jinja: the check
stage (`struckdown/check.py`) validates those against an Environment. Lark's own
errors are translated in `lark_errors`, includes are found and read in
`includes`, and the value grammar inside a slot is read in `slots`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TemplateSyntaxError
from . import spellings
from .checks import check_structure
from .includes import IncludeError, IncludeResolver
from .nodes import (
    Action,
    Branch,
    Checkpoint,
    If,
    Instructions,
    JinjaValue,
    Node,
    Option,
    Pos,
    Slot,
    Template,
    Text,
    Together,
    Turn,
)
from .slots import bare_value, parse_quantifier, unquote
from .source import SourceMap

if TYPE_CHECKING:  # Lark is imported on first parse, not with struckdown
    from lark import Lark, Token, Tree

_GRAMMAR_NAME = "struckdown.lark"


def grammar_path() -> Path:
    """The grammar ships inside the wheel; in a source checkout it lives in grammar/."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "grammar" / _GRAMMAR_NAME, here.parent / "grammar" / _GRAMMAR_NAME):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"struckdown grammar {_GRAMMAR_NAME} not found near {here}")


def _import_lark() -> type[Lark]:
    """`lark.Lark`, imported without the third-party `regex` module: lark imports it when
    it is installed (some other package may bring it) for its `regex=True` option, which
    this grammar does not use, and it costs as much as lark itself (SPEC §28). Anything
    that imports `regex` later still gets it."""
    import sys

    hidden = "regex" not in sys.modules
    if hidden:
        sys.modules["regex"] = None  # type: ignore[assignment]  # `import regex` raises ImportError
    try:
        from lark import Lark
    finally:
        if hidden and sys.modules.get("regex", ...) is None:
            del sys.modules["regex"]
    return Lark


@lru_cache(maxsize=1)
def _lark() -> Lark:
    Lark = _import_lark()  # noqa: N806 - the class

    return Lark(
        grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=False,  # positions come from tokens: a tree's is its first token's
        maybe_placeholders=False,
        cache=True,  # parse tables cached on disk: a cold process skips ~0.4 s of grammar analysis
    )


class _Builder:
    """Walks the Lark tree of one file and builds AST nodes."""

    def __init__(self, source: str, filename: str | None, includes: IncludeResolver) -> None:
        self.src = SourceMap(source, filename)
        self.filename = filename
        self.includes = includes

    def pos(self, item: Token | Tree[Any]) -> Pos:
        while not isinstance(item, str):  # a tree: every block and slot starts with its opening token
            item = item.children[0]
        return Pos(item.line or 1, item.column or 1, self.filename)

    def tag_text(self, token: Token) -> Text:
        return Text(str(token), self.pos(token))

    def error(self, message: str, pos: Pos, hint: str | None = None) -> TemplateSyntaxError:
        # `pos` may lie in an included file (a slot an include brought into <system>)
        return self.src.for_file(pos.filename).error(message, pos.line, pos.column, hint)

    # -- sequences -------------------------------------------------------
    def items(self, children: Sequence[Token | Tree[Any]]) -> tuple[Node, ...]:
        out: list[Node] = []
        for child in children:
            for node in self.item(child):
                if isinstance(node, Text) and out and isinstance(out[-1], Text):
                    out[-1] = out[-1].joined(node)
                else:
                    out.append(node)
        return tuple(out)

    def item(self, child: Token | Tree[Any]) -> list[Node]:
        if isinstance(child, str):
            kind = child.type
            if kind == "TEXT":
                return [Text(str(child), self.pos(child))]
            if kind == "COMMENT":
                return []
            if kind == "CHECKPOINT":
                return [self.checkpoint(child)]
            if kind == "INCLUDE":
                return list(self.include(child))
            raise self.error(f"unexpected {child!s}", self.pos(child))
        handler = getattr(self, f"tree_{child.data}")
        result = handler(child)
        return result if isinstance(result, list) else [result]

    # -- leaves ----------------------------------------------------------
    def checkpoint(self, token: Token) -> Checkpoint:
        match = re.match(r"<(\w+)\s*/?>(.*?)(?:</\w+\s*>)?$", str(token), re.S)
        name = " ".join(match.group(2).split()) if match else ""  # a name written over lines is one line
        return Checkpoint(name or None, self.pos(token))

    def include(self, token: Token) -> tuple[Node, ...]:
        match = re.search(r"src\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", str(token))
        assert match is not None
        src = match.group(1) if match.group(1) is not None else match.group(2)
        pos = self.pos(token)
        try:
            return self.includes.load(src, self.filename)
        except IncludeError as exc:
            failure = self.error(str(exc), pos, exc.hint)
        raise failure  # outside the except: the error carries no foreign context (it is pickled)

    # -- blocks ----------------------------------------------------------
    def _tagged(self, tree: Tree[Any]) -> tuple[Token, tuple[Node, ...]]:
        return _tok(tree.children[0]), self.items(tree.children[1:-1])

    def _instructions(self, tree: Tree[Any], kind: str) -> Instructions:
        opener, body = self._tagged(tree)
        words = str(opener).strip("<>").split()[1:]
        scope, mode = "global", "append"
        for word in words:
            if word in ("global", "local"):
                scope = word
            elif word in ("append", "replace"):
                mode = word
            else:
                raise self.error(
                    f"unknown <{kind}> modifier {word!r}",
                    self.pos(opener),
                    "modifiers are: local, global, append, replace",
                )
        self._only_text(body, f"<{kind}>")
        return Instructions(kind, body, scope, mode, self.pos(opener))  # type: ignore[arg-type]

    def tree_system(self, tree: Tree[Any]) -> Instructions:
        return self._instructions(tree, "system")

    def tree_header(self, tree: Tree[Any]) -> Instructions:
        return self._instructions(tree, "header")

    def _turn(self, tree: Tree[Any], role: str) -> Turn:
        opener, body = self._tagged(tree)
        self._only_text(body, f"<{role}>")
        return Turn(role, body, self.pos(opener))  # type: ignore[arg-type]

    def tree_user(self, tree: Tree[Any]) -> Turn:
        return self._turn(tree, "user")

    def tree_assistant(self, tree: Tree[Any]) -> Turn:
        return self._turn(tree, "assistant")

    def tree_together(self, tree: Tree[Any]) -> Together:
        opener, nested = self._tagged(tree)
        # a <together> inside another joins it (0.18 ran the inner slots with the outer ones)
        body = tuple(n for node in nested for n in (node.body if isinstance(node, Together) else (node,)))
        for node in body:
            if not isinstance(node, (Text, Slot)):
                raise self.error(
                    "only text and slots may appear inside <together>",
                    node.pos,
                    "move tags, actions and conditions outside the <together> block",
                )
        return Together(body, self.pos(opener))

    def _only_text(self, body: tuple[Node, ...], where: str) -> None:
        for node in body:
            if not isinstance(node, Text):
                raise self.error(f"only text may appear inside {where}", node.pos)

    def tree_body(self, tree: Tree[Any]) -> tuple[Node, ...]:
        return self.items(tree.children)

    def tree_if_block(self, tree: Tree[Any]) -> list[Node]:
        children = tree.children
        branches: list[Branch] = []
        raw: list[Text] = []  # the block as text, in case it holds no structure
        opener = _tok(children[0])
        cond: str | None = _tag_expression(opener, "if")
        body = self.tree_body(children[1])
        branches.append(Branch(cond, body, self.pos(opener)))
        raw += [self.tag_text(opener), *_texts(body)]
        for part in children[2:-1]:
            tag, part_body = _tok(part.children[0]), self.tree_body(part.children[1])
            cond = _tag_expression(tag, "elif") if part.data == "elif_branch" else None
            branches.append(Branch(cond, part_body, self.pos(tag)))
            raw += [self.tag_text(tag), *_texts(part_body)]
        raw.append(self.tag_text(_tok(children[-1])))
        pos = self.pos(children[0])
        if all(isinstance(n, Text) for b in branches for n in b.body):
            return [_join(raw)]
        for branch in branches:
            for node in branch.body:
                if isinstance(node, Checkpoint):
                    raise self.error(
                        "a checkpoint cannot be inside {% if %}",
                        node.pos,
                        "segments are fixed; put the condition inside the segment instead",
                    )
        return [If(tuple(branches), pos)]

    def tree_for_block(self, tree: Tree[Any]) -> list[Node]:
        opener, body_tree, closer = tree.children
        body = self.tree_body(body_tree)
        if all(isinstance(n, Text) for n in body):
            return [_join([self.tag_text(_tok(opener)), *_texts(body), self.tag_text(_tok(closer))])]
        first = next(n for n in body if not isinstance(n, Text))
        raise self.error(
            "{% for %} around a slot or tag is not supported",
            first.pos,
            "use a list slot such as [[item*]] or [[type{3}:name]], or complete_batch() over inputs",
        )

    # -- slots -----------------------------------------------------------
    def tree_slot(self, tree: Tree[Any]) -> Node:
        head = next(c for c in tree.children if not isinstance(c, str) and c.data == "head")
        option_tree = next(
            (c for c in tree.children if not isinstance(c, str) and c.data == "options"), None
        )
        pos = self.pos(tree)
        toks = list(head.children)
        bang = bool(toks) and toks[0].type == "BANG"
        if bang:
            toks.pop(0)
        at = bool(toks) and toks[0].type == "AT"
        if at:
            toks.pop(0)
        idents = [t for t in toks if t.type == "IDENT"]
        quants = [(i, t) for i, t in enumerate(toks) if t.type == "QUANT"]
        has_colon = any(t.type == "COLON" for t in toks)
        options = self.options(option_tree, slot=not at) if option_tree is not None else ()
        if at:
            if bang or quants:
                raise self.error("actions take no '!' or quantifier", pos)
            name = str(idents[0])
            if not has_colon:  # [[@name]]: the value is stored under the action's name
                return Action(name, name, options, pos, implicit_key=True)
            key = str(idents[1]) if len(idents) > 1 else self.auto_key(name)
            return Action(name, key, options, pos)
        if len(quants) > 1:
            raise self.error("a slot takes one quantifier", self.pos(quants[1][1]))
        try:
            quantifier = parse_quantifier(str(quants[0][1])) if quants else None
        except ValueError:  # more digits than int() accepts
            raise self.error("quantifier number is too long", self.pos(quants[0][1])) from None
        if quants and quantifier is None:
            raise self.error("quantifier {m,n} needs m <= n", self.pos(quants[0][1]))
        if has_colon:
            type_name, type_pos = str(idents[0]), self.pos(idents[0])
            if len(idents) > 1:
                key, key_pos = str(idents[1]), self.pos(idents[1])
            else:  # [[type:]]: named for its type, as 0.x did
                key, key_pos = self.auto_key(type_name), type_pos
        else:
            type_name, key, type_pos, key_pos = "respond", str(idents[0]), None, self.pos(idents[0])
        # A bare `required` among the options is the required flag (quoted, it is a choice).
        flagged = [o for o in options if o.key is None and not o.quoted and o.value == spellings.REQUIRED_WORD]
        options = tuple(o for o in options if o not in flagged)
        seen: set[str] = set()
        for option in options:
            if option.key is not None:
                if option.key in seen:
                    raise self.error(f"option {option.key!r} given twice", option.pos)
                seen.add(option.key)
        if flagged and "required" in seen:
            raise self.error("option 'required' given twice", flagged[0].pos)
        # `required=true` (or yes/on/1) written as a literal marks the slot required like `!`
        # does; the check stage refuses any other value of `required`.
        required = bang or bool(flagged) or any(o.key == "required" and spellings.is_true(o.value) for o in options)
        return Slot(key, type_name, quantifier, required, options, pos, type_pos, key_pos)

    def auto_key(self, name: str) -> str:
        """`_name_01`, `_name_02`, …: the key of a slot or action written without one."""
        counters = self.includes.auto_keys
        counters[name] = counters.get(name, 0) + 1
        return f"_{name}_{counters[name]:02d}"

    def options(self, tree: Tree[Any], *, slot: bool = True) -> tuple[Option, ...]:
        """A slot's or an action's options. A slot's keys are read case-insensitively with
        0.x's spellings (`ge=`, `regex=`, …) mapped to today's, and its unquoted
        yes/no/on/off values are booleans; an action's keys are its function's parameter names."""
        out: list[Option] = []
        for child in tree.children:
            if isinstance(child, str):  # COMMA
                continue
            if child.data == "keyed":
                key_tok, value_tok = map(_tok, child.children)
                key = str(key_tok).rstrip("= \t\r\n")
                value, quoted = self.option_value(value_tok)
                if slot:
                    key = spellings.slot_key(key)
                    if isinstance(value, str) and not quoted and value_tok.type == "BARE":
                        word = spellings.flag_word(value)
                        value = value if word is None else word
                out.append(Option(key, value, self.pos(key_tok), quoted, self.pos(value_tok)))
            else:
                value_tok = _tok(child.children[0])
                value, quoted = self.option_value(value_tok)
                out.append(Option(None, value, self.pos(value_tok), quoted))
        return tuple(out)

    def option_value(self, token: Token) -> tuple[Any, bool]:
        text = str(token)
        surrogate = re.search(r"[\ud800-\udfff]", text)
        if surrogate:
            raise self.error(
                f"option value contains a lone surrogate {surrogate.group()!r}",
                self.pos(token),
                "it is not valid Unicode text and cannot be sent to a model; remove it",
            )
        if token.type == "QUOTED":
            return unquote(text), True
        if token.type == "JINJA_EXPR":
            return JinjaValue(text[2:-2].strip()), False
        try:
            return bare_value(text.strip()), False
        except ValueError:  # more digits than int() accepts
            raise self.error(f"number {text.strip()[:20]}… is too long", self.pos(token)) from None


def _tok(item: Token | Tree[Any]) -> Token:
    """A child the grammar guarantees is a token (a tag, an option's key or value)."""
    assert isinstance(item, str), item
    return item


def _texts(nodes: tuple[Node, ...]) -> list[Text]:
    return [n for n in nodes if isinstance(n, Text)]


def _join(texts: list[Text]) -> Text:
    joined = texts[0]
    for text in texts[1:]:
        joined = joined.joined(text)
    return joined


def _tag_expression(token: Token, keyword: str) -> str:
    inner = str(token)[2:-2].strip("-+ \t\r\n")
    return inner[len(keyword) :].strip()


def _parse_nodes(source: str, filename: str | None, includes: IncludeResolver) -> tuple[Node, ...]:
    builder = _Builder(source, filename, includes)
    parser = _lark()
    from lark.exceptions import UnexpectedInput

    try:
        tree = parser.parse(source)
    except UnexpectedInput as exc:
        from .lark_errors import lark_error

        failure = lark_error(exc, builder.src)
    else:
        _check_depth(tree, builder)
        return builder.items(tree.children)
    raise failure


MAX_NESTING = 40


def _check_depth(tree: Tree[Any], builder: _Builder) -> None:
    """Blocks nested deeper than MAX_NESTING are an error (the walks over the AST are
    recursive, and Jinja/Python give up on deep nesting with unhelpful errors)."""
    stack: list[tuple[Tree[Any], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.children:
            if isinstance(child, str):  # a Token
                continue
            nested = depth + (child.data not in ("body", "elif_branch", "else_branch"))
            if nested > MAX_NESTING:
                raise builder.error(
                    f"blocks are nested more than {MAX_NESTING} deep", builder.pos(child),
                    "flatten the template: split it into includes or segments",
                )
            stack.append((child, nested))


def parse_template(
    source: str,
    *,
    template_path: str | os.PathLike[str] | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
) -> Template:
    """Parse and check a whole template; raises TemplateSyntaxError."""
    filename = str(template_path) if template_path else None
    includes = IncludeResolver(template_path, include_paths, _parse_nodes)
    nodes = _parse_nodes(source, filename, includes)
    check_structure(nodes, SourceMap(source, filename))
    return Template(nodes, source, filename, tuple(includes.files))
