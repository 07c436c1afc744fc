"""Words for a plan, shared by `sd explain`, the editor's hover and the playground."""

from __future__ import annotations

from typing import Any


def quantity(quantifier: tuple[int, int | None] | None) -> str:
    """How many answers a slot's quantifier asks for."""
    if quantifier is None:
        return "one answer"
    low, high = quantifier
    if high is None:
        return "a list of any length" if low == 0 else f"a list of {low} or more"
    return f"a list of exactly {low}" if low == high else f"a list of {low} to {high}"


def limit_text(ceiling: int | None, limit: int | None, asked: Any, option: str, unit: str, *, show_asked: bool) -> str:
    """A plan's clamped `limit`, saying where it came from (`max_iter=…` lowered it, or
    asked for more than the ceiling)."""
    if asked is None or isinstance(asked, bool) or not isinstance(asked, int):
        return f"{limit} {unit}"
    if ceiling is not None and asked > ceiling:
        return f"{limit} {unit} ({option}={asked}, clamped to the ceiling)"
    return f"{limit} {unit} ({option}={asked})" if show_asked else f"{limit} {unit} ({option})"
