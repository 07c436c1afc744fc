"""Counted nouns for every message and display: `1 answer`, `2 answers`, `1,204 tokens`.

One helper, so no front end says "1 answers" or "1 requests" again (issue 40, item 16)."""

from __future__ import annotations


def counted(count: int, word: str, plural: str | None = None) -> str:
    """`count` and `word`, in the plural unless the count is one (`plural` for irregular words)."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"
