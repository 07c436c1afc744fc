"""The type names struckdown 0.x registered besides today's (SPEC §11), as plain data.

`default` is `respond` and `boolean` is `bool`; `poem` is free text (written at a
high temperature); `decide` is a bool, or one of its positional choices;
`date_rule` is a recurrence rule shaped like RFC 5545's RRULE; and
`chunked_conversation` is a list of `{description, start, end}` spans. Their item
plans live in `legacy_plans`; this module holds only the names, so the builtin
tables can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Names that are another builtin under a second name.
ALIASES: Mapping[str, str] = {"default": "respond", "boolean": "bool"}

#: Free-text types (the answer is plain text, streamed).
LEGACY_TEXT_TYPES: frozenset[str] = frozenset({"default", "poem"})

#: Types whose positional options mean something (`decide`'s choices).
LEGACY_POSITIONAL: frozenset[str] = frozenset({"decide"})

_TEXT_OPTIONS = frozenset({"min_length", "max_length", "pattern"})

#: Type options (besides `required`) each legacy name accepts.
LEGACY_OPTIONS: Mapping[str, frozenset[str]] = {
    "default": _TEXT_OPTIONS,
    "poem": _TEXT_OPTIONS,
    "boolean": frozenset(),
    "decide": frozenset(),
    "date_rule": frozenset(),
    "chunked_conversation": frozenset(),
}

#: Every legacy name. `[[poem]]` (no type) is a free-text slot named `poem`, not an
#: ambiguity: 0.x templates use these words as answer names.
LEGACY_NAMES: frozenset[str] = frozenset(LEGACY_OPTIONS)

LEGACY_DESCRIPTIONS: Mapping[str, str] = {"default": "The answer", "poem": "A poem"}
