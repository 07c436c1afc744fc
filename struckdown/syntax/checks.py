"""Structure checks over a whole parsed file that no single grammar rule can make.

Only syntax lives here: the check stage (`struckdown/check.py`) validates names,
types, options, actions and Jinja against an Environment.
"""

from __future__ import annotations

from ..errors import TemplateSyntaxError
from .nodes import Action, If, Node, Slot, Together
from .source import SourceMap


def check_structure(nodes: tuple[Node, ...], src: SourceMap) -> None:
    _check_keys(nodes, set(), src)


def _error(src: SourceMap, node: Node, message: str, hint: str | None = None) -> TemplateSyntaxError:
    return src.for_file(node.pos.filename).error(message, node.pos.line, node.pos.column, hint)


def _check_keys(nodes: tuple[Node, ...], seen: set[str], src: SourceMap) -> None:
    """Duplicate answer keys are errors, except in exclusive branches of one {% if %}
    (and the implicit key of a keyless action such as `[[@history]]`)."""
    for node in nodes:
        key = node.key if isinstance(node, (Slot, Action)) else None
        if isinstance(node, Action) and node.implicit_key:
            key = None  # `[[@history]]` may recur: each stores its value under the action's name
        if key is not None:
            if key in seen:
                raise _error(src, node, f"duplicate slot key {key!r}", "each answer needs its own name")
            seen.add(key)
        if isinstance(node, Together):
            _check_keys(node.body, seen, src)
        elif isinstance(node, If):
            added: set[str] = set()
            for branch in node.branches:
                branch_seen = set(seen)
                _check_keys(branch.body, branch_seen, src)
                added |= branch_seen - seen
            seen |= added
