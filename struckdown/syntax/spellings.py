"""The spellings of slot options that struckdown 0.x accepted, read as today's (SPEC §11).

0.x templates write `ge=`/`le=`, `minlength=`, `regex=`, `required=yes` or
`USE_TOOLS=On`, and a bare `required` among a slot's options. They are spellings,
not features: the builder turns them into the one canonical form
(`min=`, `min_length=`, `pattern=`, `required=true`, lower-case keys) before any
later stage sees them, so the check and plan stages and `sd explain` know only
that form. Actions are not touched: their keys are Python parameter names.
"""

from __future__ import annotations

from typing import Any

#: Old key → today's key (after lower-casing).
KEY_ALIASES: dict[str, str] = {
    "ge": "min",
    "le": "max",
    "minlength": "min_length",
    "maxlength": "max_length",
    "regex": "pattern",
}

#: Unquoted words that mean true or false as a keyed option's value (any case).
#: `1`/`0` are numbers in the value grammar; a flag option reads them as true/false.
FLAG_WORDS: dict[str, bool] = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}

#: The positional word that marks a slot required (`[[date:d|required]]`); quoted, it is a choice.
REQUIRED_WORD = "required"


def slot_key(key: str) -> str:
    """A slot option's key as today's grammar names it: lower case, old spellings mapped."""
    lowered = key.lower()
    return KEY_ALIASES.get(lowered, lowered)


def flag_word(text: str) -> bool | None:
    """True/False for an unquoted yes/no/on/off/true/false (any case), else None."""
    return FLAG_WORDS.get(text.lower())


def is_true(value: Any) -> bool:
    """Whether a parsed option value says "true" (`true`, `yes`, `on`, `1`)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 1
    return isinstance(value, str) and flag_word(value.strip()) is True
