"""Plain values with a convenience of 0.x: a guard's verdict read as `v.triggered` too."""

from __future__ import annotations

from typing import Any


class Verdict(dict[str, Any]):
    """A guard's verdict: the plain dict `{"triggered": …, "reason": …}` (JSON, equality
    and `v["triggered"]` as any dict), whose keys also read as attributes
    (`result.guard.triggered`), as 0.x's verdict object did."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
