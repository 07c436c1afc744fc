"""The Pygments lexer `struckdown`, driven by the roles table (registered through the
`pygments.lexers` entry point, so `pygmentize -l struckdown` and `sd preview` use it).

It walks the same states as the TextMate grammar with the grammar's own regexes,
matched at the current position as Lark's lexer does; whatever no rule takes is
plain text (in a slot: an error, as the parser would say).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.token import Error, Text, _TokenType, string_to_tokentype

from .roles import ROLES, SLOT_CLOSE_ROLE, compiled_states, plain_text_regex, slot_close_regex

__all__ = ["StruckdownLexer"]

_BLANK = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _states() -> dict[str, list[tuple[re.Pattern[str], str, str | None]]]:
    return {
        state: [(re.compile(r.regex), r.role, r.enter) for r in rules] for state, rules in compiled_states().items()
    }


@lru_cache(maxsize=1)
def _fixed() -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(slot_close_regex()), re.compile(plain_text_regex())


def scan(text: str) -> Iterator[tuple[int, str | None, str]]:
    """(offset, role, text) for the whole text: role None for plain text, "error" for
    what no rule of a slot takes."""
    states = _states()
    close, plain = _fixed()
    stack = ["text"]
    pos = 0
    while pos < len(text):
        state = stack[-1]
        if state != "text":
            match = close.match(text, pos)
            if match:
                yield pos, SLOT_CLOSE_ROLE, match.group()
                pos = match.end()
                stack = ["text"]
                continue
        for regex, role, enter in states[state]:
            match = regex.match(text, pos)
            if match and match.end() > pos:
                yield pos, role, match.group()
                pos = match.end()
                if enter:
                    stack.append(enter)
                break
        else:
            match = (plain if state == "text" else _BLANK).match(text, pos)
            if match:
                yield pos, None, match.group()
                pos = match.end()
            else:
                yield pos, None if state == "text" else "error", text[pos]
                pos += 1


class StruckdownLexer(Lexer):
    name = "struckdown"
    aliases = ["struckdown", "sd"]
    filenames = ["*.sd"]
    mimetypes = ["text/x-struckdown"]
    url = "https://pypi.org/project/struckdown/"

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, _TokenType, str]]:
        tokens = {name: string_to_tokentype(role.token) for name, role in ROLES.items()}
        for pos, role, value in scan(text):
            yield pos, Error if role == "error" else tokens[role] if role else Text, value
