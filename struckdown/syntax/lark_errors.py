"""Lark's parse exceptions → TemplateSyntaxError with a message a template author can act on.

Lark reports what token it expected; an author needs to hear "unclosed '{{'" or
"</user> without <user>", positioned in their file. This mapping knows the
grammar's terminal names (`SYSTEM_CLOSE`, `SLOT_CLOSE`, …) and nothing else of
the parser.
"""

from __future__ import annotations

import re

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import TemplateSyntaxError
from .source import SourceMap

_TAG_NAMES = {
    "SYSTEM_CLOSE": "</system>",
    "HEADER_CLOSE": "</header>",
    "USER_CLOSE": "</user>",
    "ASSISTANT_CLOSE": "</assistant>",
    "TOGETHER_CLOSE": "</together>",
    "ENDIF_TAG": "{% endif %}",
    "ENDFOR_TAG": "{% endfor %}",
    "ELSE_TAG": "{% else %}",
    "ELIF_TAG": "{% elif %}",
    "SLOT_CLOSE": "]]",
}
_OPENERS = {
    "SYSTEM_CLOSE": "<system>",
    "HEADER_CLOSE": "<header>",
    "USER_CLOSE": "<user>",
    "ASSISTANT_CLOSE": "<assistant>",
    "TOGETHER_CLOSE": "<together>",
    "ENDIF_TAG": "{% if %}",
    "ENDFOR_TAG": "{% for %}",
    "ELSE_TAG": "{% if %}",
    "ELIF_TAG": "{% if %}",
}
_SLOT_HINT = "slots look like [[name]], [[type:name]] or [[type:name|option, key=value]]"
_OPTION_HINT = (
    "options are values or key=value pairs separated by commas; quote a value that has spaces, "
    'commas or brackets: key="a, b"'
)
_GENERAL_HINT = "check this spot for a typo; docs/language.md shows every piece of the syntax"
_NAMED = {"\n": "line break", "\t": "tab", "\r": "carriage return", " ": "space"}


def _shown(text: str) -> str:
    """A piece of the template as the author sees it, to follow "unexpected": quoted, cut at
    the line's end, no escapes; a whitespace character by its name ("unexpected line break")."""
    if text[:1] in _NAMED:
        return _NAMED[text[:1]]
    piece = text.split("\n", 1)[0].split("\r", 1)[0][:20]
    return f"'{piece}'" if piece else "end of line"


def _second_pipe(src: SourceMap, start: int, line: int, column: int) -> TemplateSyntaxError | None:
    """A second `|` in a slot (0.x's old docs wrote `[[pick:c|a,b|model=x]]`): the fix
    docs/migration.md gives, one pipe and commas, written out for this slot."""
    if not src.text.startswith("|", start):
        return None
    opened = src.text.rfind("[[", 0, start)
    if opened < 0 or "]]" in src.text[opened:start] or "|" not in src.text[opened:start]:
        return None
    end = src.text.find("]]", start)
    inner = src.text[opened + 2 : end if end >= 0 else len(src.text)]
    if "\n" in inner:
        return None
    head, _, rest = inner.partition("|")
    options = ", ".join(p.strip() for p in rest.split("|") if p.strip())
    return src.error(
        "a second '|' in the slot: options follow one '|', separated by commas", line, column,
        f"one pipe, commas: [[{head}|{options}]]",
    )


def _opener_pos(src: SourceMap, pattern: str) -> tuple[int, int] | None:
    """Line and column of the last opener matching `pattern` (the one left open)."""
    found = None
    for found in re.finditer(pattern, src.text):
        pass
    if found is None:
        return None
    before = src.text[: found.start()]
    return before.count("\n") + 1, found.start() - (before.rfind("\n") + 1) + 1


_OPENER_PATTERNS = {
    "SLOT_CLOSE": r"\[\[",
    "ENDIF_TAG": r"\{%-?\s*if\b",
    "ENDFOR_TAG": r"\{%-?\s*for\b",
    "SYSTEM_CLOSE": r"<system\b",
    "HEADER_CLOSE": r"<header\b",
    "USER_CLOSE": r"<user\b",
    "ASSISTANT_CLOSE": r"<assistant\b",
    "TOGETHER_CLOSE": r"<together\b",
}


def lark_error(exc: UnexpectedInput, src: SourceMap) -> TemplateSyntaxError:
    """The TemplateSyntaxError for a Lark parse failure, at Lark's position (or the end)."""
    line, column = exc.line if exc.line > 0 else 1, exc.column if exc.column > 0 else 1
    if isinstance(exc, UnexpectedCharacters):
        rest = src.text[exc.pos_in_stream :]
        if rest.startswith("{{"):
            return src.error("unclosed '{{'", line, column, "close the expression with '}}'")
        if rest.startswith("{#"):
            return src.error("unclosed Jinja comment '{#'", line, column, "close it with '#}'")
        if rest.startswith("<!--"):
            return src.error("unclosed comment '<!--'", line, column, "close it with '-->'")
        if rest.startswith("{%"):
            return src.error("unclosed '{%'", line, column, "close the tag with '%}'")
        if rest.startswith("<"):
            tag = re.match(r"</?\s*(\w+)", rest)
            name = tag.group(1) if tag else "?"
            return src.error(
                f"malformed <{name}> tag",
                line,
                column,
                "tags are <system>, <system local>, <header>, <user>, <assistant>, <together>, "
                '<checkpoint>, <include src="file.sd"/>',
            )
        piped = _second_pipe(src, exc.pos_in_stream, line, column) if exc.pos_in_stream is not None else None
        if piped is not None:
            return piped
        if exc.allowed and exc.allowed & {"SLOT_CLOSE", "PIPE", "COMMA", "COLON", "IDENT", "QUANT", "BANG"}:
            return src.error(f"unexpected {_shown(rest[:1])} in slot", line, column, _SLOT_HINT)
        return src.error(f"unexpected character {_shown(rest[:1])}", line, column, _GENERAL_HINT)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type in _OPENERS and token.type not in exc.expected:
            still_open = [n for n in _OPENERS if n in exc.expected and n not in ("ELSE_TAG", "ELIF_TAG")]
            if still_open:
                return src.error(
                    f"unexpected {_TAG_NAMES[token.type]}: {_OPENERS[still_open[0]]} is still open",
                    line, column, f"close it with {_TAG_NAMES[still_open[0]]} first, or remove the stray closer",
                )
            return src.error(
                f"{_TAG_NAMES[token.type]} without {_OPENERS[token.type]}", line, column,
                f"remove it, or open the block with {_OPENERS[token.type]} above",
            )
        if token.type == "$END":
            return _eof_error(exc.expected, src)
        start = getattr(token, "start_pos", None)
        piped = _second_pipe(src, start, line, column) if start is not None else None
        if piped is not None:
            return piped
        if exc.expected & {"SLOT_CLOSE", "PIPE", "COLON", "IDENT", "COMMA"}:
            return src.error(f"unexpected {_shown(str(token))} in slot", line, column, _SLOT_HINT)
        closer = re.fullmatch(r"</\s*(\w+)\s*>", str(token).strip())
        if closer:
            return src.error(
                f"{str(token).strip()} without <{closer.group(1)}>", line, column,
                f"remove it, or open the block with <{closer.group(1)}> above",
            )
        if _in_options(src, exc):
            return src.error(f"unexpected {_shown(str(token))} in the slot's options", line, column, _OPTION_HINT)
        return src.error(f"unexpected {_shown(str(token))}", line, column, _GENERAL_HINT)
    if isinstance(exc, UnexpectedEOF):
        return _eof_error(set(exc.expected), src)
    return src.error(str(exc).splitlines()[0], line, column, _GENERAL_HINT)


def _in_options(src: SourceMap, exc: UnexpectedToken) -> bool:
    """Whether the bad token sits after a slot's `|`, before its `]]`."""
    start = getattr(exc.token, "start_pos", None)
    if start is None:
        return False
    opened = src.text.rfind("[[", 0, start)
    return opened >= 0 and "]]" not in src.text[opened:start] and "|" in src.text[opened:start]


def _eof_error(expected: set[str], src: SourceMap) -> TemplateSyntaxError:
    lines = src.text.split("\n")
    line, column = len(lines), len(lines[-1]) + 1
    for name in ("SLOT_CLOSE", "ENDIF_TAG", "ENDFOR_TAG", "SYSTEM_CLOSE", "HEADER_CLOSE",
                 "USER_CLOSE", "ASSISTANT_CLOSE", "TOGETHER_CLOSE"):
        if name in expected:
            opener = _OPENERS.get(name, "[[")
            at = _opener_pos(src, _OPENER_PATTERNS[name])
            if at is not None:  # point at what was left open, not at the end of the file
                return src.error(
                    f"{opener} is never closed", *at, f"add {_TAG_NAMES[name]} where it should end"
                )
            return src.error(f"{opener} is never closed", line, column, f"add {_TAG_NAMES[name]}")
    return src.error("unexpected end of template", line, column, _GENERAL_HINT)
