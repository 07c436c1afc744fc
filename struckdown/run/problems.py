"""Why a model's answer could not be used, in words a template author reads.

pydantic's validation errors print a type code, a repr of the whole input cut in the
middle of a word, and a link to pydantic's documentation on every line. A
`BadModelOutput` (and the hint turn a fallback model reads) says instead what was wrong
with each field and how the answer began, cut at a word.
"""

from __future__ import annotations

import re
from typing import Any

#: How much of the reason a message keeps, and of the answer it quotes.
REASON_LIMIT = 300
INPUT_LIMIT = 60
_SHOWN_ERRORS = 3
_URL_LINE = re.compile(r"\s*For further information visit \S+")
_CODE = re.compile(r"\s*\[type=[^\]]*\]")
_INTERNAL_FIELDS = ("response", "__root__")  # the wrapper pydantic-ai puts around a scalar answer


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut before a word (never inside one)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[limit - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def validation_problem(error: BaseException) -> str:
    """The last validation problem behind a failed answer (the explicit cause chain of
    pydantic-ai's error only: `__context__` may be any error handled nearby), or ""."""
    cause = error.__cause__
    for _ in range(8):  # a cause chain is short; a cycle must not hang the error path
        if cause is None:
            return ""
        details = _details(cause)
        if details:
            return clip(_described(details), REASON_LIMIT)
        if cause.__cause__ is None:
            break
        cause = cause.__cause__
    assert cause is not None
    return clip(_CODE.sub("", _URL_LINE.sub("", str(cause))), REASON_LIMIT)


def _details(cause: BaseException) -> list[dict[str, Any]]:
    """pydantic's error list of a ValidationError, or of pydantic-ai's retry part."""
    errors = getattr(cause, "errors", None)
    if callable(errors) and hasattr(cause, "title"):  # pydantic_core.ValidationError
        try:
            found: list[dict[str, Any]] = list(errors(include_url=False))
            return found
        except Exception:  # noqa: BLE001 - a stranger with an errors() method: use its text
            return []
    content = getattr(getattr(cause, "tool_retry", None), "content", None)  # ToolRetryError → RetryPromptPart
    if isinstance(content, list):
        return [d for d in content if isinstance(d, dict)]
    return []


def _described(details: list[dict[str, Any]]) -> str:
    parts = [_one(detail) for detail in details[:_SHOWN_ERRORS]]
    if len(details) > _SHOWN_ERRORS:
        parts.append(f"and {len(details) - _SHOWN_ERRORS} more")
    return "; ".join(parts)


def _one(detail: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in detail.get("loc", ()) if p not in _INTERNAL_FIELDS)
    message = str(detail.get("msg", "invalid"))
    text = f"{where}: {message}" if where else message
    given = detail.get("input")
    if isinstance(given, str):
        text += f" (the answer was '{clip(given, INPUT_LIMIT)}')" if given.strip() else " (the answer was empty)"
    elif isinstance(given, int | float | bool) or given is None:
        text += f" (the answer was {given!r})"
    return text
