"""`sd flat`: a template with every `<include src=…/>` replaced by the included text.

Nothing else changes: Jinja, comments and slots stay as written (nothing is
rendered, unlike 0.x's `sd flat`, which blanked every `{{ variable }}`). Includes
are found exactly as the parser finds them (the template's folder, then
`include_paths`, never outside them, no cycles), and the result parses to the same
Program as the template.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .includes import IncludeError, IncludeResolver
from .source import SourceMap


def flatten(
    source: str,
    *,
    template_path: str | os.PathLike[str] | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
) -> str:
    """`source` with its includes inlined, recursively; TemplateSyntaxError as parsing gives."""
    resolver = IncludeResolver(template_path, include_paths, _unused)
    return _flat(source, str(template_path) if template_path else None, resolver)


def _unused(source: str, filename: str, resolver: IncludeResolver) -> Any:  # pragma: no cover - flatten reads only
    raise AssertionError("flatten does not parse included files into nodes")


def _flat(source: str, filename: str | None, resolver: IncludeResolver) -> str:
    import re

    from lark import Token
    from lark.exceptions import UnexpectedInput

    from .lark_errors import lark_error
    from .parser import _lark

    try:
        tree = _lark().parse(source)
    except UnexpectedInput as exc:
        failure = lark_error(exc, SourceMap(source, filename))
    else:
        pieces: list[str] = []
        last = 0
        for token in sorted(tree.scan_values(lambda v: isinstance(v, Token) and v.type == "INCLUDE"),
                            key=lambda t: t.start_pos or 0):
            match = re.search(r"src\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", str(token))
            assert match is not None
            src = match.group(1) if match.group(1) is not None else match.group(2)
            try:
                path = resolver.find(src, filename)
                text = resolver.read(path)
            except IncludeError as exc:
                raise SourceMap(source, filename).error(str(exc), token.line or 1, token.column or 1, exc.hint) from None
            pieces.append(source[last : token.start_pos])
            with resolver.inside(path):
                pieces.append(_flat(text, str(path), resolver))
            last = token.end_pos or last
        pieces.append(source[last:])
        return "".join(pieces)
    raise failure
