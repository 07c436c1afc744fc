"""`[[@search:hits|query, n=5]]`: a web search's results as text (opt-in, like `@fetch`).

The built-in search asks DuckDuckGo and friends through the `ddgs` library (the
`search` extra: `pip install 'struckdown[search]'`), and runs only when the host
allows it with `STRUCKDOWN_ALLOW_SEARCH=1`: a template must not reach the network
on its own. Its time cap is the host's (`SEARCH_TIMEOUT_S`), and it returns at most
`MAX_RESULTS` results.

Another backend (an API with a key, a company index, a fake in tests) is any
function `(query, n) -> [{"title", "url", "snippet"}, …]`:

    env.register_action("search", make_search(my_backend), role="user")

The value is a numbered list (title, address, snippet) and joins the conversation
as a user turn, as in 0.x, so the next slot sees it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..syntax.nodes import Action

SEARCH_TIMEOUT_S = 10
MAX_RESULTS = 20
DEFAULT_RESULTS = 5
USAGE = '[[@search:hits|query, n=5]] or [[@search:hits|query="a topic"]]'
_KEYS = ("query", "n", "max_results", "timeout", "max_tokens", "embed", "raw", "playwright")
#: 0.18's options that change nothing here (it fetched and embedded pages; this returns snippets)
_INERT = ("embed", "raw", "playwright")

#: `(query, n) -> results`, each a mapping with title, url (or href) and snippet (or body).
SearchBackend = Callable[[str, int], Sequence[Mapping[str, Any]]]


def check(node: Action) -> None:
    if not node.options:
        raise ValueError(f"needs a query: {USAGE}")
    unknown = [o.key for o in node.options if o.key is not None and o.key not in _KEYS]
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (it takes query=, n= or max_results=, max_tokens=, "
                         f"timeout=; 0.18's embed=, raw=, playwright= are accepted and change nothing): {USAGE}")


def make_search(backend: SearchBackend) -> Callable[..., str]:
    """The `@search` action over `backend` (register it with `register_action`)."""

    def search(
        query: Any = None, n: int | None = None, max_results: int | None = None, max_tokens: int | None = None,
        timeout: float | None = None, embed: Any = None, raw: Any = None, playwright: Any = None,
    ) -> str:
        words = " ".join(str(q) for q in query) if isinstance(query, (list, tuple)) else str(query or "")
        if not words.strip():
            raise ValueError("@search needs a query")
        count = n if n is not None else max_results if max_results is not None else DEFAULT_RESULTS
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"n= must be a whole number of at least 1, not {count!r}")
        inert = [name for name, value in (("embed", embed), ("raw", raw), ("playwright", playwright)) if value]
        if inert:
            from ..notices import warn

            warn(f"@search: {', '.join(n + '=' for n in inert)} accepted for 0.18's templates and "
                 "change nothing (the results are snippets)")
        results = list(backend(words.strip(), min(count, MAX_RESULTS)))[: min(count, MAX_RESULTS)]
        text = format_results(results)
        # 0.18's max_tokens=: about four characters a token; timeout= is under the host's own cap anyway
        return text if max_tokens is None else text[: max(0, int(max_tokens)) * 4]

    search.__doc__ = f"Web search through {getattr(backend, '__name__', 'a backend')}."
    return search


def format_results(results: Sequence[Mapping[str, Any]]) -> str:
    """`1. Title — address` then the snippet, one result after another."""
    lines: list[str] = []
    for number, item in enumerate(results, 1):
        title = str(item.get("title") or "").strip() or "(untitled)"
        url = str(item.get("url") or item.get("href") or "").strip()
        snippet = " ".join(str(item.get("snippet") or item.get("body") or "").split())
        lines.append(f"{number}. {title}" + (f" — {url}" if url else ""))
        if snippet:
            lines.append(f"   {snippet}")
    return "\n".join(lines)


def ddgs_backend(query: str, n: int) -> list[dict[str, Any]]:
    """DuckDuckGo and other engines through `ddgs`, when the host allows it."""
    if os.environ.get("STRUCKDOWN_ALLOW_SEARCH") != "1":
        raise PermissionError("@search is disabled; set STRUCKDOWN_ALLOW_SEARCH=1 to allow it")
    try:
        from ddgs import DDGS
    except ImportError:
        raise ImportError("@search needs the ddgs library: pip install 'struckdown[search]'") from None
    found: list[dict[str, Any]] = DDGS(timeout=SEARCH_TIMEOUT_S).text(query, max_results=n)
    return found


builtin_search = make_search(ddgs_backend)
