"""Plain data shared by the type builders: the request, the built spec, the error.

These live in their own module so that the builders, the registry and the
engine can all import them without import cycles, and so that importing them
costs nothing beyond the standard library.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPTION_NAMES", "OutputSpec", "TextRules", "TypeBuildError", "TypeRequest"]

#: Every type option a slot may carry besides ``required``. Kept in one place so
#: the parser, the builders and the docs agree on the vocabulary.
OPTION_NAMES: frozenset[str] = frozenset({"min", "max", "min_length", "max_length", "pattern"})

_CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?"
#: `time` and `datetime` are sent with a pattern, not `format: time|date-time`: a constrained
#: decoder (llama.cpp's grammar) makes those formats require an offset, so "3:30 PM" came back as
#: 20:30:00+00:00 (issue 40 item 20). The offset stays optional, as the descriptions say.
TEMPORAL_PATTERNS: dict[str, str] = {
    "time": f"^{_CLOCK}$",
    "datetime": f"^[1-9][0-9]{{3}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]{_CLOCK}$",
}



class TypeBuildError(ValueError):
    """A slot's type, options or quantifier cannot be turned into an output model.

    A ``ValueError`` so callers that only care about "bad template" can catch
    the broad class; its message is meant to be shown to a template author as is.
    """


@functools.lru_cache(maxsize=256)
def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """`re.search` semantics, on pydantic-core's linear-time Rust engine when the pattern
    fits it (no answer can make it backtrack for seconds), else on Python's `re` (a pattern
    with look-around or backreferences: the template author's choice, see docs/security.md)."""
    if is_linear(pattern):
        from pydantic_core import SchemaValidator, core_schema

        schema = core_schema.str_schema(pattern=pattern)
        return SchemaValidator(schema, core_schema.CoreConfig(regex_engine="rust-regex")).isinstance_python
    compiled = re.compile(pattern)
    return lambda text: compiled.search(text) is not None


@functools.lru_cache(maxsize=256)
def is_linear(pattern: str) -> bool:
    """Whether the linear-time engine takes `pattern` (it lacks look-around and backreferences)."""
    from pydantic_core import SchemaError, SchemaValidator, core_schema

    try:
        SchemaValidator(core_schema.str_schema(pattern=pattern), core_schema.CoreConfig(regex_engine="rust-regex"))
    except SchemaError:
        return False
    return True


@dataclass(frozen=True)
class TypeRequest:
    """What a slot asks for, as parsed from ``[[type:name|options]]``.

    ``options`` holds only the type options (``min``, ``max``, ``min_length``,
    ``max_length``, ``pattern``); values arrive already parsed. The dataclass is
    frozen but ``options`` may be an unhashable dict, so the builder derives its
    own cache key instead of hashing the request.
    """

    type_name: str
    positional: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    quantifier: tuple[int, int | None] | None = None
    required: bool = False


@dataclass(frozen=True)
class TextRules:
    """Constraints on a free-text answer that streams as plain text.

    Text answers are not validated by pydantic (the output type is ``str``), so
    the engine checks them with these rules and feeds the message back to the
    model on failure. ``pattern`` uses ``re.search`` semantics, exactly like the
    ``pattern`` keyword of JSON schema and of the output models, on the same
    linear-time engine (pydantic-core's Rust ``regex``).
    """

    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    required: bool = False

    def check(self, text: str) -> str:
        """Return ``text`` unchanged, or raise ``ValueError`` saying what to fix."""
        if self.required and not text.strip():
            raise ValueError("The answer must not be empty")
        if self.min_length is not None and len(text) < self.min_length:
            raise ValueError(
                f"The answer must be at least {self.min_length} characters long (it is {len(text)})"
            )
        if self.max_length is not None and len(text) > self.max_length:
            raise ValueError(
                f"The answer must be at most {self.max_length} characters long (it is {len(text)})"
            )
        if self.pattern is not None and not pattern_matcher(self.pattern)(text):
            raise ValueError(f"The answer must match the pattern {self.pattern}")
        return text


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """Everything the engine needs to ask for, check and unwrap one slot's answer.

    Built once per distinct request and cached, so identity comparison is the
    right equality (``eq=False``) and ``answer_schema`` must be treated as
    read-only: it is shared by every user of the cached spec.
    """

    output_type: Any
    is_text: bool
    answer_schema: dict[str, Any]
    _convert: Callable[[Any], Any] = field(default=_identity, repr=False)
    _text_rules: TextRules | None = field(default=None, repr=False)
    #: ``answer_schema`` as canonical JSON (sorted keys): a ready-made cache key part.
    answer_schema_json: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.answer_schema_json:
            canonical = json.dumps(self.answer_schema, sort_keys=True, separators=(",", ":"))
            object.__setattr__(self, "answer_schema_json", canonical)

    def to_value(self, raw: Any) -> Any:
        """Turn what pydantic-ai returned into the plain Python value of the slot.

        Accepts the validated ``output_type`` instance (or the text for text
        specs); a dict is validated first, so a stored raw answer can be replayed.
        """
        if self.is_text:
            return raw
        if isinstance(raw, Mapping):
            raw = self.output_type.model_validate(raw)
        return self._convert(raw)

    @property
    def has_text_rules(self) -> bool:
        """True when a text answer must be checked (pattern, lengths, required)."""
        return self._text_rules is not None

    def check_text(self, text: str) -> str:
        """Check a text answer against the slot's text rules; no-op when there are none."""
        if self._text_rules is None:
            return text
        return self._text_rules.check(text)
