"""HTML → readable markdown-ish text for `@fetch` and `@markdownify`, in linear time.

With the `search` extra installed, libxml2's HTML parser (through lxml) reads the page
once, handing start tags, end tags and text to a small collector; no tree is built.
Python's own `html.parser` is quadratic on some malformed pages (80 KB of `<a<a<a…`
took 10 s, 80 KB of `<a <a <a …` 150 s), so it is not used: without lxml a small
linear tag scanner does the same job, less faithfully (a `>` inside a quoted attribute
ends its tag).

Either way the input is capped (`HTML_MAX_CHARS`, the host's to change), a cut is noted
at the end of the text, and a numeric character reference longer than any code point
(`&#999…9;`, which Python's unescape cannot turn into an int) reads as U+FFFD instead of
failing the action.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

#: The most characters of HTML turned into text; the rest is dropped with a note.
HTML_MAX_CHARS = 2_000_000

_HIDDEN = frozenset({"script", "style", "noscript"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCKS = frozenset({"p", "div", "li", "tr"})
#: Numeric references with more digits than any code point needs (7 hex, 8 decimal).
_LONG_CHARREF = re.compile(r"&#(?:[xX]0*[1-9a-fA-F][0-9a-fA-F]{6,}|0*[1-9][0-9]{7,});?")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class TextCollector:
    """Parser events → text parts: headings as `#`, list items as `- `, block ends and
    `<br>` as line breaks; script, style and noscript content dropped."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.hidden = 0

    def start(self, tag: str, attrs: Any = None) -> None:
        tag = tag.lower()
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _HEADINGS:
            self.parts.append("\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("- ")
        elif tag == "br":
            self.parts.append("\n")

    def end(self, tag: str) -> None:
        tag = tag.lower()
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _BLOCKS or tag in _HEADINGS:
            self.parts.append("\n")

    def data(self, text: str) -> None:
        if not self.hidden:
            self.parts.append(text)

    def close(self) -> str:
        return "".join(self.parts)


def lxml_etree() -> Any:
    try:
        return importlib.import_module("lxml.etree")
    except ImportError:
        return None


def _with_lxml(etree: Any, html: str) -> str:
    collector = TextCollector()
    parser = etree.HTMLParser(target=collector, recover=True, no_network=True, remove_comments=True, remove_pis=True)
    parser.feed(html)
    text: str = parser.close()
    return text


_TAG_NAME = re.compile(r"/?\s*([a-zA-Z][a-zA-Z0-9]*)")


def _with_scanner(html: str) -> str:
    """A small tag scanner for when lxml is missing: each step finds the end of one
    tag, comment or hidden element with `str.find`, and an unfinished one ends the
    page, so no character is looked at twice (Python's `html.parser` rescans)."""
    from html import unescape

    collector = TextCollector()
    lower = html.lower()
    pos, size = 0, len(html)
    while pos < size:
        lt = html.find("<", pos)
        if lt < 0:
            collector.data(unescape(html[pos:]))
            break
        if lt > pos:
            collector.data(unescape(html[pos:lt]))
        if html.startswith("<!--", lt):
            close = html.find("-->", lt + 4)
            pos = size if close < 0 else close + 3
            continue
        gt = html.find(">", lt + 1)
        if gt < 0:
            break  # an unfinished tag at the end: dropped, as browsers do
        inside = html[lt + 1 : gt]
        name = _TAG_NAME.match(inside)
        pos = gt + 1
        if name is None:
            continue  # `<!doctype …>`, `<?…>`, `< b`: not a tag that shapes text
        tag = name.group(1).lower()
        if inside.lstrip().startswith("/"):
            collector.end(tag)
        elif tag in _HIDDEN:
            close = lower.find("</" + tag, pos)  # the content of script/style is not HTML
            pos = size if close < 0 else close
        else:
            collector.start(tag)
            if inside.rstrip().endswith("/"):
                collector.end(tag)
    return collector.close()


def prepared_html(html: str) -> tuple[str, str]:
    """(the HTML to read, the note to end the text with): cut at `HTML_MAX_CHARS`, numeric
    references past Unicode and lone surrogates made U+FFFD."""
    note = ""
    if len(html) > HTML_MAX_CHARS:
        note = f"\n\n[truncated: the HTML had {len(html):,} characters; the first {HTML_MAX_CHARS:,} were read]"
        html = html[:HTML_MAX_CHARS]
    return _LONE_SURROGATE.sub("\ufffd", _LONG_CHARREF.sub("\ufffd", html)), note


def html_to_text(html: str) -> str:
    """Readable text of a page, in one linear pass (see the module docstring)."""
    html, note = prepared_html(html)
    etree = lxml_etree()
    raw = _with_lxml(etree, html) if etree is not None else _with_scanner(html)
    return re.sub(r"\n\s*\n+", "\n\n", raw).strip() + note
