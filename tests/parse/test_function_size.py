"""No function in struckdown/run/ is over 100 lines (issue 45: the slot's attempt loop
stays a loop; what it does is in functions of their own)."""

from __future__ import annotations

import ast
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "struckdown" / "run"
LIMIT = 100


def _sizes(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_no_function_in_run_is_over_100_lines() -> None:
    long = {
        f"{path.relative_to(RUN)}:{name}": size
        for path in sorted(RUN.rglob("*.py"))
        for name, size in _sizes(path)
        if size > LIMIT
    }
    assert long == {}


def test_the_walk_sees_the_attempt_loop() -> None:
    """The walk is real: it finds run_model_slot, and counts its lines."""
    sizes = dict(_sizes(RUN / "slot.py"))
    assert 20 < sizes["run_model_slot"] <= LIMIT
