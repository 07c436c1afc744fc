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

from .table import TYPES, names

#: Names that are another builtin under a second name.
ALIASES: Mapping[str, str] = {t.name: t.alias_of for t in TYPES.values() if t.alias_of is not None}

#: Free-text types (the answer is plain text, streamed).
LEGACY_TEXT_TYPES: frozenset[str] = names(legacy=True, family="text")

#: Types whose positional options mean something (`decide`'s choices).
LEGACY_POSITIONAL: frozenset[str] = names(legacy=True, positional=True)

#: Type options (besides `required`) each legacy name accepts.
LEGACY_OPTIONS: Mapping[str, frozenset[str]] = {t.name: t.options for t in TYPES.values() if t.legacy}

#: Every legacy name. `[[poem]]` (no type) is a free-text slot named `poem`, not an
#: ambiguity: 0.x templates use these words as answer names.
LEGACY_NAMES: frozenset[str] = frozenset(LEGACY_OPTIONS)

LEGACY_DESCRIPTIONS: Mapping[str, str] = {
    t.name: t.description for t in TYPES.values() if t.legacy and t.description is not None
}
