"""Validation and normalisation of type options and quantifiers.

Options arrive from the template parser already parsed (int/float/str), but a
template author can still write nonsense (``min=abc`` on an int, a broken
regex, ``min`` above ``max``). Every check lives here so each builtin type
applies the same rules with the same error messages.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ..codec import iso_duration
from .spec import TypeBuildError

__all__ = [
    "check_bounds_order",
    "parse_length",
    "parse_number",
    "parse_pattern",
    "parse_quantifier",
    "parse_temporal",
]

Temporal = dt.date | dt.datetime | dt.time | dt.timedelta


def parse_number(type_name: str, option: str, value: Any, *, integer: bool) -> int | float:
    """Read a numeric bound; integer types reject fractional bounds instead of rounding them."""
    if isinstance(value, bool):
        raise TypeBuildError(f"{type_name}: option {option}= must be a number, not {value!r}")
    number: int | float
    if isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            try:
                number = float(value.strip())
            except ValueError:
                raise TypeBuildError(
                    f"{type_name}: option {option}= must be a number, not {value!r}"
                ) from None
    else:
        raise TypeBuildError(f"{type_name}: option {option}= must be a number, not {value!r}")
    if isinstance(number, float) and (number != number or number in (float("inf"), float("-inf"))):
        raise TypeBuildError(f"{type_name}: option {option}= must be a finite number")
    if integer:
        if isinstance(number, float):
            if not number.is_integer():
                raise TypeBuildError(f"{type_name}: option {option}= must be a whole number, not {value!r}")
            number = int(number)
    return number


def parse_length(type_name: str, option: str, value: Any) -> int:
    """Read a length bound: a whole number of characters, never negative."""
    number = parse_number(type_name, option, value, integer=True)
    if number < 0:
        raise TypeBuildError(f"{type_name}: option {option}= must not be negative")
    return int(number)


def parse_pattern(type_name: str, value: Any) -> str:
    """Check the regex compiles (see `pattern_matcher` for the engine that runs it)."""
    if not isinstance(value, str):
        raise TypeBuildError(f"{type_name}: option pattern= must be a string, not {value!r}")
    try:
        re.compile(value)
    except re.error as exc:
        raise TypeBuildError(f"{type_name}: invalid regular expression {value!r}: {exc}") from None
    return value


def parse_temporal(type_name: str, option: str, value: Any, kind: type) -> Any:
    """Read a date/datetime/time/duration bound written as an ISO 8601 string.

    Parsed with pydantic so bounds accept exactly what answers accept (e.g.
    ``PT1H30M`` for durations). Imported lazily: only templates with temporal
    bounds pay for the adapter.
    """
    if type(value) is kind:
        return value
    if not isinstance(value, str):
        raise TypeBuildError(f"{type_name}: option {option}= must be an ISO 8601 string, not {value!r}")
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(value.strip(), strict=False)
    except ValidationError:
        raise TypeBuildError(
            f"{type_name}: option {option}= is not a valid ISO 8601 {type_name}: {value!r}"
        ) from None


def check_bounds_order(type_name: str, low_name: str, low: Any, high_name: str, high: Any) -> None:
    """Reject ``low > high``: such a slot could never be answered."""
    if low is None or high is None:
        return
    try:
        inverted = low > high
    except TypeError:  # e.g. naive vs aware datetimes
        inverted = comparable(low) > comparable(high)
    if inverted:
        raise TypeBuildError(
            f"{type_name}: {low_name}={_show(low)} is greater than {high_name}={_show(high)}"
        )


def comparable(value: Any) -> Any:
    """Make datetimes/times comparable regardless of timezone awareness.

    Naive datetimes are taken as UTC; times drop their zone (a wall-clock time
    has no meaningful offset to compare by without a date).
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value
    if isinstance(value, dt.time):
        return value.replace(tzinfo=None)
    return value


def _show(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        return iso_duration(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def parse_quantifier(
    type_name: str, quantifier: tuple[int, int | None] | None
) -> tuple[int, int | None] | None:
    """Validate ``(min_items, max_items)``; ``None`` means a single answer."""
    if quantifier is None:
        return None
    try:
        low, high = quantifier
    except (TypeError, ValueError):
        raise TypeBuildError(
            f"{type_name}: quantifier must be (min_items, max_items), not {quantifier!r}"
        ) from None
    if isinstance(low, bool) or not isinstance(low, int) or low < 0:
        raise TypeBuildError(f"{type_name}: quantifier minimum must be a whole number >= 0")
    if high is not None:
        if isinstance(high, bool) or not isinstance(high, int):
            raise TypeBuildError(f"{type_name}: quantifier maximum must be a whole number")
        if high < 1:
            raise TypeBuildError(f"{type_name}: quantifier must allow at least one item")
        if low > high:
            raise TypeBuildError(f"{type_name}: quantifier minimum {low} is greater than maximum {high}")
    return (low, high)
