"""`Safe` exists for code written against the older struckdown.

Values never become structure here (SPEC §1, §2.6), so there is nothing to mark
safe: `Safe(value)` behaves exactly like the string it wraps.
"""

from __future__ import annotations


class Safe(str):
    """Compatibility no-op: a plain string."""

    __slots__ = ()
