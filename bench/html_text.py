"""(w) `html_to_text` (`@fetch`, `@markdownify`) on hostile pages: linear with lxml.

Python's `html.parser` rescans an unfinished start tag from each `<`, so 80 KB of
`<a<a<a…` costs it seconds (quadratic); libxml2 through lxml (the `search` extra) reads
it once. The rows time Python's parser (the old path) against the current path on the same 80 KB page, and the current
path (lxml, and the scanner used without it) on a page ten times larger, whose time should grow about tenfold, not a hundredfold.

Runnable alone: `python -m bench.html_text [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

from .common import Row, print_table

HOSTILE = {"unclosed <a": "<a", "open comments": "<!--", "tags with a space": "<a "}
OLD_PATH_MAX = 40_000  # "<a " * 27,000 took Python's parser 150 s; half that size a quarter of it


def _stdlib(page: str) -> None:
    """The old path: Python's `html.parser` over the whole page."""
    from html.parser import HTMLParser

    parser = HTMLParser(convert_charrefs=True)
    parser.feed(page)
    parser.close()


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


async def run(quick: bool = False) -> list[Row]:
    from struckdown.actions import html_text

    size = 20_000 if quick else 80_000
    rows: list[Row] = []
    for name, unit in HOSTILE.items():
        page = unit * (size // len(unit))
        big = page * 10
        after = min(_timed(lambda: html_text.html_to_text(page)) for _ in range(3))
        after_big = min(_timed(lambda: html_text.html_to_text(big)) for _ in range(3))
        before = _timed(lambda: _stdlib(page[:OLD_PATH_MAX]))
        scanner = min(_timed(lambda: html_text._with_scanner(big)) for _ in range(3))
        old_kb = min(len(page), OLD_PATH_MAX) // 1000
        rows.append(Row(f"w. {name}, {old_kb} KB: html.parser (old)", f"{before:.3f} s", "-", None, "info", None))
        rows.append(Row(
            f"w. {name}, {len(page) // 1000} KB: html_to_text", f"{after * 1000:.1f} ms", f"{before:.3f} s",
            after / before if before else None, "info", None,
        ))  # fmt: skip
        growth = after_big / after if after else None
        rows.append(Row(
            f"w. {name}, {len(big) // 1000} KB: html_to_text", f"{after_big * 1000:.1f} ms",
            f"{after * 1000:.1f} ms x 10", growth, "<= 30x for 10x the input", growth is not None and growth <= 30,
        ))  # fmt: skip
        rows.append(
            Row(f"w. {name}, {len(big) // 1000} KB: scanner (no lxml)", f"{scanner * 1000:.1f} ms", "-", None, "info", None)
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.html_text", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print_table(asyncio.run(run(parser.parse_args().quick)), "html_to_text on hostile pages")


if __name__ == "__main__":
    main()
