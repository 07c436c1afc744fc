"""Reading the parts of a slot the grammar leaves as text: quantifiers and option values.

Pure functions of the token text (plus the type registry and the hint for an
unknown name), kept apart from the tree walk in `parser` so that the builder
reads as the structure of a template and these as the small value grammar
inside `[[…]]`.
"""

from __future__ import annotations

import re
from typing import Any


def parse_quantifier(text: str) -> tuple[int, int | None] | None:
    """`*`, `+`, `?`, `{n}`, `{m,n}` or `{m,}` → (min, max), None when max < min;
    ValueError for a number longer than int() accepts."""
    fixed = {"*": (0, None), "+": (1, None), "?": (0, 1)}
    if text in fixed:
        return fixed[text]
    inner = text.strip("{} \t")
    if "," not in inner:
        n = int(inner)
        return (n, n)
    lo_text, hi_text = (p.strip() for p in inner.split(",", 1))
    lo, hi = int(lo_text), (int(hi_text) if hi_text else None)
    if hi is not None and hi < lo:
        return None
    return (lo, hi)


def unquote(text: str) -> str:
    """A quoted option value without its quotes. A backslash escapes a quote or a
    backslash (`\\"`, `\\\\`); before anything else it is kept, so a regular expression
    reads as written: `pattern="\\w{4}\\d+"` is `\\w{4}\\d+` (as in 0.x's docs)."""
    body = text[1:-1]
    return re.sub(r"\\([\\\"'])", r"\1", body)


def bare_value(text: str) -> Any:
    """An unquoted option value: true/false, a whole number, a decimal, else the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?", text):
        return float(text)
    return text
