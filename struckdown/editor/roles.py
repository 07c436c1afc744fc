"""The one table: which terminal of `grammar/struckdown.lark` plays which highlight role.

Every highlighter (the Pygments lexer, the TextMate grammars, the language
server's semantic tokens) is built from `ROLES` and `STATES` below plus the
terminals' own regexes, read from the grammar through Lark. Nothing here repeats a pattern of the grammar; the few
regex pieces written here are lookarounds that tell apart the roles of one
terminal (`IDENT` as a type, a slot key or an action name).

The states follow the grammar's contextual lexer: `text` is the template body,
`head` the inside of `[[ … ]]` before the `|`, `options` the rest of a slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Role:
    name: str
    scope: str  # TextMate scope; unique per role so tests can read the role back
    token: str  # Pygments token type, dotted
    semantic: str  # LSP semantic token type (what `sd lsp` sends editors such as Neovim)


ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        Role("comment", "comment.block.struckdown", "Comment.Multiline", "comment"),
        Role("tag", "entity.name.tag.struckdown", "Name.Tag", "keyword"),
        Role("checkpoint", "keyword.control.checkpoint.struckdown", "Keyword.Namespace", "keyword"),
        Role("include", "keyword.control.import.struckdown", "Keyword.Namespace", "keyword"),
        Role("jinja.block", "keyword.control.jinja.struckdown", "Comment.Preproc", "macro"),
        Role("jinja.statement", "keyword.other.jinja.struckdown", "Comment.Preproc", "macro"),
        Role("jinja.expression", "string.interpolated.jinja.struckdown", "String.Interpol", "macro"),
        Role("slot", "meta.slot.struckdown", "Text", ""),
        Role("slot.open", "punctuation.definition.slot.begin.struckdown", "Punctuation", "operator"),
        Role("slot.close", "punctuation.definition.slot.end.struckdown", "Punctuation", "operator"),
        Role("slot.separator", "punctuation.separator.struckdown", "Punctuation", "operator"),
        Role("slot.required", "keyword.operator.required.struckdown", "Operator", "operator"),
        Role("slot.at", "keyword.operator.action.struckdown", "Operator", "operator"),
        Role("slot.action", "entity.name.function.action.struckdown", "Name.Function", "function"),
        Role("slot.type", "entity.name.type.struckdown", "Keyword.Type", "type"),
        Role("slot.key", "variable.other.slot.struckdown", "Name.Variable", "variable"),
        Role("slot.quantifier", "keyword.operator.quantifier.struckdown", "Operator", "operator"),
        Role("option.key", "variable.parameter.option.struckdown", "Name.Attribute", "parameter"),
        Role("option.string", "string.quoted.struckdown", "String", "string"),
        Role("option.value", "constant.other.option.struckdown", "Literal", "enumMember"),
    )
}

#: The semantic token types `sd lsp` declares, in legend order.
SEMANTIC_TYPES: tuple[str, ...] = tuple(dict.fromkeys(r.semantic for r in ROLES.values() if r.semantic))


@dataclass(frozen=True)
class Rule:
    """One terminal in one state, with the role it plays there.

    `piece` picks one alternative of a terminal whose regex is a repetition of
    alternatives (TEXT: its `{{ … }}` and `{% … %}` pieces), by how it starts.
    `after` / `before` are terminals that must precede / follow (a `?` suffix
    makes one optional). `enter` names the state a match opens; `leave` closes it.
    """

    terminal: str
    role: str
    piece: str | None = None
    after: str | None = None
    before: tuple[str, ...] = ()
    enter: str | None = None


TAGS = (
    "SYSTEM_OPEN", "SYSTEM_CLOSE", "HEADER_OPEN", "HEADER_CLOSE", "USER_OPEN", "USER_CLOSE",
    "ASSISTANT_OPEN", "ASSISTANT_CLOSE", "TOGETHER_OPEN", "TOGETHER_CLOSE",
)
JINJA_BLOCKS = ("IF_TAG", "ELIF_TAG", "ELSE_TAG", "ENDIF_TAG", "FOR_TAG", "ENDFOR_TAG")

STATES: dict[str, tuple[Rule, ...]] = {
    "text": (
        Rule("COMMENT", "comment"),
        *(Rule(t, "tag") for t in TAGS),
        Rule("CHECKPOINT", "checkpoint"),
        Rule("INCLUDE", "include"),
        *(Rule(t, "jinja.block") for t in JINJA_BLOCKS),
        Rule("TEXT", "jinja.expression", piece=r"\{\{"),
        Rule("TEXT", "jinja.statement", piece=r"\{%"),
        Rule("SLOT_OPEN", "slot.open", enter="head"),
    ),
    "head": (
        Rule("BANG", "slot.required"),
        Rule("AT", "slot.at"),
        Rule("IDENT", "slot.action", after="AT"),
        Rule("IDENT", "slot.type", before=("QUANT?", "COLON")),
        Rule("IDENT", "slot.key"),
        Rule("QUANT", "slot.quantifier"),
        Rule("COLON", "slot.separator"),
        Rule("PIPE", "slot.separator", enter="options"),
    ),
    "options": (
        Rule("KEY_EQ", "option.key"),
        Rule("QUOTED", "option.string"),
        Rule("JINJA_EXPR", "jinja.expression"),
        Rule("BARE", "option.value"),
        Rule("COMMA", "slot.separator"),
    ),
}

#: The terminal that closes `head` and `options` (both end with the slot).
SLOT_CLOSE = "SLOT_CLOSE"
SLOT_CLOSE_ROLE = "slot.close"

#: Bodies a token may run over several lines with: regex suffix → (end delimiter,
#: escape pattern inside). Line-based highlighters (TextMate) need a begin/end
#: region for those; the suffix is cut off the terminal's own regex to get `begin`.
RUNS_UNTIL: dict[str, tuple[str, str | None]] = {
    r"(?:[^%]|%(?!\}))*%\}": (r"%\}", None),
    r"(?:[^}]|\}(?!\}))*\}\}": (r"\}\}", None),
    r"(?:.|\n)*?-->": (r"-->", None),
    r"(?:.|\n)*?#\}": (r"#\}", None),
    r'(?:[^"\\]|\\.)*"': (r'"', r"\\."),
    r"(?:[^'\\]|\\.)*'": (r"'", r"\\."),
}


# ---------------------------------------------------------------------------
# regex plumbing: alternatives of a terminal, lookarounds, multi-line splits


def _structure(regex: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, depth after it) for each `(`, `)` and `|` of `regex` from
    `start` that is structure: not escaped and not inside a character class (where a
    leading `]` or `^]` is a literal)."""
    depth, i, in_class = 0, start, False
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]" or regex[i + 1 : i + 3] == "^]":
                i += 2 if regex[i + 1] == "]" else 3
                continue
        elif ch in "()|":
            depth += {"(": 1, ")": -1, "|": 0}[ch]
            yield i, ch, depth
        i += 1


def split_alternatives(regex: str) -> list[str]:
    """The top-level alternatives of `regex`, after unwrapping one `(?:…)` or `(?:…)+`
    group that spans all of it (how Lark writes `/a/ | /b/` and TEXT's repetition)."""
    inner = _unwrap(regex)
    parts, start = [], 0
    for i, ch, depth in _structure(inner):
        if ch == "|" and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return parts


def _unwrap(regex: str) -> str:
    for suffix in (")+", ")"):
        if regex.startswith("(?:") and regex.endswith(suffix) and _closing(regex, 0) == len(regex) - len(suffix):
            return regex[3 : len(regex) - len(suffix)]
    return regex


def _closing(regex: str, open_at: int) -> int:
    """Index of the `)` that closes the group opened at `open_at`."""
    return next((i for i, ch, depth in _structure(regex, open_at) if ch == ")" and depth == 0), -1)


@dataclass(frozen=True)
class Compiled:
    """A rule with its regex resolved from the grammar; `regions` are the (begin, end,
    escape) of its alternatives that may run over several lines."""

    regex: str
    role: str
    terminal: str
    enter: str | None = None
    regions: tuple[tuple[str, str, str | None], ...] = ()


def grammar_regexes() -> dict[str, str]:
    from .core import terminals

    return {t.name: t.regex for t in terminals()}


def grammar_order() -> list[str]:
    from .core import terminals

    return [t.name for t in terminals()]


def compile_rule(rule: Rule, regexes: dict[str, str]) -> Compiled:
    if rule.terminal not in regexes:
        raise LookupError(f"the grammar has no terminal {rule.terminal} (roles table is stale)")
    core = regexes[rule.terminal]
    if rule.piece is not None:
        pieces = [p for p in split_alternatives(core) if p.startswith(rule.piece)]
        if len(pieces) != 1:
            raise LookupError(f"{rule.terminal} has {len(pieces)} alternatives starting {rule.piece!r}, not one")
        core = pieces[0]
    behind = f"(?<={regexes[rule.after]})" if rule.after else ""
    ahead = ""
    if rule.before:
        ahead = "(?=" + "".join(
            f"(?:{regexes[t[:-1]]})?" if t.endswith("?") else f"(?:{regexes[t]})" for t in rule.before
        ) + ")"
    regions = tuple(
        (behind + alternative[: -len(suffix)], end, escape)
        for alternative in split_alternatives(core)
        for suffix, (end, escape) in RUNS_UNTIL.items()
        if alternative.endswith(suffix)
    )
    return Compiled(f"{behind}(?:{core}){ahead}", rule.role, rule.terminal, rule.enter, regions)


@lru_cache(maxsize=1)
def compiled_states() -> dict[str, tuple[Compiled, ...]]:
    """Each state's rules in the order Lark's lexer tries their terminals (a stable
    sort, so rules sharing a terminal keep the table's order: the specific first)."""
    regexes = grammar_regexes()
    order = {name: i for i, name in enumerate(grammar_order())}
    out: dict[str, tuple[Compiled, ...]] = {}
    for state, rules in STATES.items():
        ranked = sorted(rules, key=lambda r: order[r.terminal])
        out[state] = tuple(compile_rule(r, regexes) for r in ranked)
    return out


def slot_close_regex() -> str:
    return grammar_regexes()[SLOT_CLOSE]


def plain_text_regex() -> str:
    """The pieces of TEXT that no rule gives a role (its plain runs), repeated."""
    claimed = [r.piece for rules in STATES.values() for r in rules if r.terminal == "TEXT" and r.piece]
    pieces = [p for p in split_alternatives(grammar_regexes()["TEXT"]) if not any(p.startswith(c) for c in claimed)]
    return "(?:" + "|".join(pieces) + ")+"
