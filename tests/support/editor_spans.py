"""Spans (role, start, end, text) of a template, as the Lark parser and as a highlighter sees them.

The parser's side is read off its tokens and tree, not off the roles table: a
slot's head IDENT is a type when a COLON follows it in the head, an action name
after AT, else the key; TEXT is cut into its `{{ … }}` / `{% … %}` pieces by the
grammar's own TEXT alternatives. Both sides trim whitespace (a token like PIPE
carries the spaces around it, which a line-based highlighter sees on two lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from struckdown.editor import core
from struckdown.editor.roles import ROLES, split_alternatives

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.sd"))
CORPUS = sorted((ROOT / "tests" / "editor" / "corpus").glob("*.sd"))

TAGS = {
    "SYSTEM_OPEN", "SYSTEM_CLOSE", "HEADER_OPEN", "HEADER_CLOSE", "USER_OPEN", "USER_CLOSE",
    "ASSISTANT_OPEN", "ASSISTANT_CLOSE", "TOGETHER_OPEN", "TOGETHER_CLOSE",
}
BLOCKS = {"IF_TAG", "ELIF_TAG", "ELSE_TAG", "ENDIF_TAG", "FOR_TAG", "ENDFOR_TAG"}
FIXED = {
    "COMMENT": "comment", "CHECKPOINT": "checkpoint", "INCLUDE": "include",
    "SLOT_OPEN": "slot.open", "SLOT_CLOSE": "slot.close", "PIPE": "slot.separator",
    "COLON": "slot.separator", "COMMA": "slot.separator", "BANG": "slot.required", "AT": "slot.at",
    "QUANT": "slot.quantifier", "KEY_EQ": "option.key", "QUOTED": "option.string",
    "BARE": "option.value", "JINJA_EXPR": "jinja.expression",
}


class Span(NamedTuple):
    role: str
    start: int
    end: int
    text: str


def trimmed(source: str, role: str, start: int, end: int) -> Span | None:
    while start < end and source[start].isspace():
        start += 1
    while end > start and source[end - 1].isspace():
        end -= 1
    return Span(role, start, end, source[start:end]) if end > start else None


def _text_pieces() -> tuple[re.Pattern[str], list[str | None]]:
    """TEXT's alternatives as one regex with a group each, and the role of each."""
    text = next(t.regex for t in core.terminals() if t.name == "TEXT")
    alternatives = split_alternatives(text)
    kinds = [
        "jinja.expression" if p.startswith(r"\{\{") else "jinja.statement" if p.startswith(r"\{%") else None
        for p in alternatives
    ]
    return re.compile("|".join(f"({p})" for p in alternatives)), kinds


def lark_spans(source: str) -> list[Span]:
    tokens = core.lark_tokens(source)
    pieces, kinds = _text_pieces()
    out: list[Span | None] = []
    slot_start: int | None = None
    for i, token in enumerate(tokens):
        role: str | None = None
        if token.type in TAGS:
            role = "tag"
        elif token.type in BLOCKS:
            role = "jinja.block"
        elif token.type in FIXED:
            role = FIXED[token.type]
        elif token.type == "IDENT":
            before = tokens[i - 1].type if i else ""
            head_rest = [t.type for t in tokens[i + 1 : i + 3] if t.rule == "head"]
            if before == "AT":
                role = "slot.action"
            elif "COLON" in head_rest and before != "COLON":
                role = "slot.type"
            else:
                role = "slot.key"
        elif token.type == "TEXT":
            pos = 0
            while pos < len(token.text):
                match = pieces.match(token.text, pos)
                assert match, (token, pos)
                kind = kinds[match.lastindex - 1] if match.lastindex else None
                if kind:
                    out.append(trimmed(source, kind, token.start + match.start(), token.start + match.end()))
                pos = match.end()
            continue
        if role is None:
            raise AssertionError(f"no expected role for {token.type}")
        out.append(trimmed(source, role, token.start, token.end))
        if token.type == "SLOT_OPEN":
            slot_start = token.start
        elif token.type == "SLOT_CLOSE":
            assert slot_start is not None
            out.append(trimmed(source, "slot", slot_start, token.end))
    return sorted(s for s in out if s is not None)


def scan_spans(source: str, scanned: Iterable[tuple[int, str | None, str]]) -> list[Span]:
    """Spans of the Pygments lexer's scan (`struckdown.editor.pygments_lexer.scan`)."""
    out: list[Span | None] = []
    slot_start: int | None = None
    for pos, role, text in scanned:
        if role is None:
            continue
        out.append(trimmed(source, role, pos, pos + len(text)))
        if role == "slot.open":
            slot_start = pos
        elif role == "slot.close" and slot_start is not None:
            out.append(trimmed(source, "slot", slot_start, pos + len(text)))
    return sorted(s for s in out if s is not None)


_BY_SCOPE = {role.scope: name for name, role in ROLES.items() if name != "slot"}
REGION = "meta.region.struckdown"
REGION_BEGIN = "punctuation.definition.region.begin.struckdown"


def textmate_spans(source: str, tokens: list[list[Any]]) -> list[Span]:
    """Spans of vscode-textmate's tokens ([line, start, end, scopes] per token).

    A token's role is its innermost struckdown scope. A multi-line region comes
    as several tokens (begin, content, one or more per line): they are joined until
    the next region begins."""
    line_starts = [0]
    for line in source.split("\n")[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    raw: list[tuple[str, int, int, bool, bool]] = []  # role, start, end, in region, begins region
    for line, start, end, scopes in tokens:
        roles = [_BY_SCOPE[s] for s in scopes if s in _BY_SCOPE]
        if not roles:
            continue
        offset = line_starts[line]
        raw.append((roles[-1], offset + start, offset + end, REGION in scopes, REGION_BEGIN in scopes))
    merged: list[list[Any]] = []
    for role, start, end, in_region, begins in raw:
        last = merged[-1] if merged else None
        if (
            last is not None and in_region and not begins and last[3] and last[0] == role
            and source[last[2] : start].strip() == ""
        ):
            last[2] = end
        else:
            merged.append([role, start, end, in_region])
    out: list[Span | None] = [trimmed(source, role, start, end) for role, start, end, _ in merged]
    slot_start: int | None = None
    for role, start, end, _ in merged:
        if role == "slot.open":
            slot_start = start
        elif role == "slot.close" and slot_start is not None:
            out.append(trimmed(source, "slot", slot_start, end))
    return sorted(s for s in out if s is not None)


FRAGMENTS = (
    "Plain text. ", "\n", "\n\n", "a [b] c ", "x < y ", "{x} ", "[link](u) ", "{{ a }}", "{{ b\n | upper }}",
    "{% set v = 1 %}", "{%- set w = 2 -%}", "{# note #}", "{# multi\nline #}", "<!-- c -->", "<!-- a\nb -->",
    "<checkpoint>", "<checkpoint/>", "<checkpoint>Part</checkpoint>", "<obliviate>", '<include src="part.sd"/>',
    "[[x]]", "[[ y ]]", "[[!int:n]]", "[[pick:c|a, b c, 'd,e']]", "[[score*:s|lo,hi]]", "[[t{2,3}]]",
    "[[@set:k|3]]", "[[@timestamp]]", '[[r|pattern="]]|,", max_tokens=5]]', "[[q|{{ opts }}, z]]",
    "[[m|\n  temperature = 0.1 ,\n  seed=3]]", "[[\n  w\n]]", "[[json:j|\"multi\nline\"]]",
)


BLOCKS_AROUND = (
    ("<system>", "</system>"), ("<system local replace>", "</system >"), ("<header global>", "</header>"),
    ("<user>", "</user>"), ("<assistant>", "</assistant>"), ("<together>", "</together>"),
    ("{% if a %}", "{% endif %}"), ("{%- if a -%}", "{% else %}z{%+ endif %}"), ("{% for i in xs %}", "{% endfor %}"),
    ("{% if a\n and b %}", "{% elif c %}[[e]]{% endif %}"),
)


def _random_items(rng: Any, depth: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 6)):
        if depth < 3 and rng.random() < 0.25:
            opener, closer = rng.choice(BLOCKS_AROUND)
            parts.append(opener + _random_items(rng, depth + 1) + closer)
        else:
            parts.append(rng.choice(FRAGMENTS))
    return "".join(parts)


def random_templates(count: int, seed: int) -> list[str]:
    """Templates the Lark grammar accepts, built from fragments and nested blocks."""
    import random

    from lark.exceptions import LarkError

    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        text = _random_items(rng, 0)
        try:
            core.lark_tokens(text)
        except LarkError:
            continue
        out.append(text)
    return out
