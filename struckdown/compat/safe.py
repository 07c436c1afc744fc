"""`Safe` exists for code written against the older struckdown.

Values never become structure here (SPEC §1, §2.6), so there is nothing to mark
safe: `Safe(value)` behaves exactly like the string it wraps.
"""

from __future__ import annotations


class Safe(str):
    """Compatibility no-op: a plain string."""

    __slots__ = ()

    @property
    def content(self) -> str:
        """0.x's field: the wrapped text."""
        return str(self)
