"""SPEC §33: the labels a caller puts on context values (`sd.Private`, `sd.Untrusted`).

A labelled value is unwrapped before the run renders anything: the template sees the value
itself, and the run knows which context names carry which label (`split_context`). The
analysis of where labelled values go is `struckdown/flow.py`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

PRIVATE = "private"
#: The request-boundary check looks for private texts of at least this many characters
#: (a private "1" or "no" would match every request; the static check covers those).
MIN_TEXT = 4
UNTRUSTED = "untrusted"


class Labelled:
    """A context value with a label; the template reads `value`."""

    label: ClassVar[str] = ""
    __slots__ = ("value",)
    value: Any

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, Labelled) else value

    def __repr__(self) -> str:
        return f"{type(self).__name__}(…)"  # a private value is not printed by accident

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Labelled) and type(other) is type(self) and bool(other.value == self.value)

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(type(self.value))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value,))


class Private(Labelled):
    """A value that must not reach a remote model or an external tool (SPEC §33)."""

    label = PRIVATE


class Untrusted(Labelled):
    """Text from outside (a web page, an email) that must not steer a write tool (SPEC §33)."""

    label = UNTRUSTED


def split_context(
    context: Mapping[str, Any], private: Collection[str] = (), untrusted: Collection[str] = ()
) -> tuple[Mapping[str, Any], dict[str, frozenset[str]]]:
    """The context with labelled values unwrapped, and each labelled name's labels (the
    wrappers' and the names `private=` / `untrusted=` list). The same mapping back when
    nothing is labelled (the common case costs one scan)."""
    labels: dict[str, set[str]] = {}
    plain: dict[str, Any] | None = None
    for key, value in context.items():
        if isinstance(value, Labelled):
            if plain is None:
                plain = dict(context)
            plain[key] = value.value
            labels.setdefault(key, set()).add(value.label)
    for names, label in ((private, PRIVATE), (untrusted, UNTRUSTED)):
        for name in names:
            labels.setdefault(name, set()).add(label)
    return (context if plain is None else plain), {k: frozenset(v) for k, v in labels.items()}


def private_texts(context: Mapping[str, Any], labels: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    """The text of every private value of an (unwrapped) context, for the request-boundary check:
    a string as it is, a number or list by its JSON text and each string inside it."""
    out: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str):
            if len(value.strip()) >= MIN_TEXT:
                out.append(value.strip())
        elif isinstance(value, Mapping):
            for item in value.values():
                add(item)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                add(item)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if len(str(value)) >= MIN_TEXT:
                out.append(str(value))

    for name, found in labels.items():
        if PRIVATE in found and name in context:
            add(context[name])
    return tuple(sorted(set(out), key=len, reverse=True))
